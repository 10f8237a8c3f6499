// Dense GEMMs of the forward pass, y[m][n] = x[m][k] W[n][k]^T with bf16 x and W (row-major, as
// Hugging Face stores linear weights) and fp32 accumulation, through cuBLASLt.
//
// A plan (descriptors + the heuristic's algorithm) is built once per (m, n, k, output dtype) and
// reused; the workspace is allocated once, so calls are legal inside CUDA graph capture.
// Not thread-safe: one runner thread uses it.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "engine/cuda/cuda_types.h"
#include "engine/cuda/device_buffer.h"

namespace gpufrac::engine {

class CublasLtGemm {
 public:
  explicit CublasLtGemm(uint64_t workspace_bytes = 32ull << 20);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // y: [m][n], bf16 when y_bf16, else fp32. k must be a multiple of 8 and every pointer 16-byte
  // aligned (cuBLASLt's fast paths; the runner's buffers are 256-byte aligned). With
  // `accumulate`, y += x W^T (y read in its own type, the sum in fp32).
  void run(const bf16* x, const bf16* w, void* y, bool y_bf16, int m, int n, int k,
           cudaStream_t stream, bool accumulate = false);
  uint64_t workspace_bytes() const { return workspace_.bytes(); }

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t w_layout = nullptr, x_layout = nullptr, y_layout = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  const Plan& plan(int m, int n, int k, bool y_bf16);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::map<std::tuple<int, int, int, bool>, Plan> plans_;
};

}  // namespace gpufrac::engine
