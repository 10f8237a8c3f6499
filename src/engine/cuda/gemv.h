// A weight-streaming GEMM for the few tokens of a decode step: y[m][n] = x[m][k] W[n][k]^T for
// m <= kGemvMaxTokens, bf16 x and W (row-major, as gemm.h), fp32 accumulation, y in bf16 or
// fp32. One block of 128 threads per 4 weight rows (5 for one token where that fills the last
// wave of resident blocks better: n = 2560 on 132 SMs): every thread streams a share of the
// rows' 16-byte chunks (4 loads in flight per row and thread, not kept in L1) and dots them with
// the same chunks of all m rows of x (read once through the L1 cache for all the rows); the warps
// are summed in shared memory. The weights cross the memory bus exactly once per step. cuBLASLt
// (gemm.h) reaches ~3.0 of the ~4.3 TB/s at these shapes; this kernel is meant to get close to
// the copy bandwidth.
//
// Requirements (checked): k a multiple of 8; x, W and y 16-byte aligned. Asynchronous on
// `stream`, legal inside CUDA graph capture. With `overlap` the kernel is launched to overlap
// the previous kernel (kernel_launch.cuh): its blocks load their first weights while that kernel
// finishes and read x only after it completed.
#pragma once

#include <cuda_runtime.h>

#include "engine/cuda/cuda_types.h"

namespace gpufrac::engine {

constexpr int kGemvMaxTokens = 8;

void launch_gemv(const bf16* x, const bf16* w, void* y, bool y_bf16, int m, int n, int k,
                 cudaStream_t stream, bool overlap = false);

// The gate|up projection with SiLU * mul fused: w_gate_up is [2n][k] (gate rows, then up rows);
// y[m][n] (bf16) = silu(x W_gate^T) * (x W_up^T), both products kept in fp32 until the result.
// Same requirements as launch_gemv.
void launch_gemv_silu_mul(const bf16* x, const bf16* w_gate_up, bf16* y, int m, int n, int k,
                          cudaStream_t stream, bool overlap = false);

}  // namespace gpufrac::engine
