// Dense GEMMs of the forward pass, y[m][n] = x[m][k] W[n][k]^T with bf16 x and W (row-major, as
// Hugging Face stores linear weights) and fp32 accumulation, through cuBLASLt.
//
// A plan (descriptors + an algorithm) is built once per (m, n, k, output dtype) and reused; the
// workspace is allocated once, so calls are legal inside CUDA graph capture. tune() times the
// heuristic's candidate algorithms for a shape and keeps the fastest (the heuristic's first is
// not always it; docs/results/engine-h200.md compares the two per shape). A shape that was
// never tuned takes the algorithm tuned at the nearest m (by ratio) of its (n, k, dtype) when
// cuBLASLt accepts it for the shape, else the heuristic's first.
// Not thread-safe: one runner thread uses it.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

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

  struct Tuning {
    float first_ms = 0;  // the heuristic's first algorithm, GPU ms per call
    float best_ms = 0;   // the one kept
    int candidates = 0;  // algorithms timed
    int chosen = 0;      // the kept one's place in the heuristic's order (0: its first)
  };
  // Times each candidate algorithm for (m, n, k, y_bf16) on `stream` (best of three replays of a
  // graph of calls, gpu_timing.h; call i multiplies by weights[i % weights.size()], distinct
  // bytes as in a step) and keeps the fastest, the heuristic's first unless another is 2%
  // faster. y is scratch: overwritten, and read with `accumulate`. Not during graph capture.
  Tuning tune(const bf16* x, const std::vector<const bf16*>& weights, void* y, bool y_bf16,
              int m, int n, int k, bool accumulate, cudaStream_t stream);

  uint64_t workspace_bytes() const { return workspace_.bytes(); }

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t w_layout = nullptr, x_layout = nullptr, y_layout = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  Plan& plan(int m, int n, int k, bool y_bf16);
  // The heuristic's algorithms for a plan's shape, best guess first (at least one; throws
  // RuntimeFailure when cuBLASLt has none).
  std::vector<cublasLtMatmulAlgo_t> candidates(const Plan& p, int m, int n, int k);
  // Whether cuBLASLt runs `algo` for the plan's shape within the workspace.
  bool accepts(const Plan& p, const cublasLtMatmulAlgo_t& algo);
  cublasStatus_t matmul(const Plan& p, const cublasLtMatmulAlgo_t& algo, const bf16* x,
                        const bf16* w, void* y, bool accumulate, cudaStream_t stream);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::map<std::tuple<int, int, int, bool>, Plan> plans_;
  // (n, k, y_bf16) -> m -> the algorithm tune() kept.
  std::map<std::tuple<int, int, bool>, std::map<int, cublasLtMatmulAlgo_t>> tuned_;
};

}  // namespace gpufrac::engine
