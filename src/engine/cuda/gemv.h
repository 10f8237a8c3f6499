// A weight-streaming GEMM for the few tokens of a decode step: y[m][n] = x[m][k] W[n][k]^T for
// m <= kGemvMaxTokens, bf16 x and W (row-major, as gemm.h), fp32 accumulation, y in bf16 or
// fp32. One warp per output feature n streams W's row once with 16-byte loads (several in flight
// per lane, not kept in L1) and dots it with all m rows of x (read through the L1 cache), so the
// weights cross the memory bus exactly once per step. cuBLASLt (gemm.h) reaches ~3.0 of the
// ~4.3 TB/s at these shapes; this kernel is meant to get close to the copy bandwidth.
//
// Requirements (checked): k a multiple of 8; x, W and y 16-byte aligned. Asynchronous on
// `stream`, legal inside CUDA graph capture.
#pragma once

#include <cuda_runtime.h>

#include "engine/cuda/cuda_types.h"

namespace gpufrac::engine {

constexpr int kGemvMaxTokens = 8;

void launch_gemv(const bf16* x, const bf16* w, void* y, bool y_bf16, int m, int n, int k,
                 cudaStream_t stream);

}  // namespace gpufrac::engine
