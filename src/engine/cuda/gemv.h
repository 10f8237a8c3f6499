// A weight-streaming GEMM for the few tokens of a decode step: y[m][n] = x[m][k] W[n][k]^T for
// m <= kGemvMaxTokens, bf16 x and W (row-major, as gemm.h), fp32 accumulation, y in bf16 or
// fp32, or added to an fp32 matrix (the residual stream). The weight rows go in groups of 4 (5
// for one token where that leaves each block fewer rows: n = 2560 on 132 SMs) to a grid of no
// more blocks of 128 threads than are resident at once on the SMs the process may use, each
// block taking the same number of groups and issuing the loads of its next group before it sums
// the current one. Every thread streams a share of a group's 16-byte chunks (4 loads in flight
// per row and thread, not kept in L1) and dots them with the same chunks of all m rows of x (read
// through the L1 cache for all the rows); the warps are summed in shared memory. The weights
// cross the memory bus exactly once per step. cuBLASLt (gemm.h) reaches ~3.0 of the ~4.3 TB/s
// at these shapes; this kernel is meant to get close to the copy bandwidth.
//
// An RMSNorm between two GEMVs needs no kernel of its own (GemvNorm): the GEMV that adds a
// projection into the residual rows leaves what the next GEMV needs to multiply the normed rows.
//
// Requirements (checked): k a multiple of 8; x, W, y (and a GemvNorm's arrays) 16-byte aligned.
// Asynchronous on `stream`, legal inside CUDA graph capture. With `overlap` the kernel is
// launched to overlap the previous kernel (kernel_launch.cuh): its blocks load their first
// weights while that kernel finishes and read x only after it completed.
#pragma once

#include <cuda_runtime.h>

#include "engine/cuda/cuda_types.h"

namespace gpufrac::engine {

constexpr int kGemvMaxTokens = 8;

// How the GEMV stores y[m][n]: as bf16, as fp32, or added to the fp32 values y holds.
enum class GemvStore { bf16, fp32, add_fp32 };

// RMSNorm(r) W^T for the residual rows r a GEMV with GemvStore::add_fp32 has just updated
// (y = r, [m][n]), carried to the next GEMV instead of a norm kernel: the first leaves
//   rows[t][i] = bf16(r[t][i] * weight[i])   and   sums[t][b] = sum of r[t][i]^2 over row group b,
// the next multiplies `rows` and scales token t's outputs by 1 / sqrt(sum_b sums[t][b] / n +
// eps). That is RMSNorm(r) W^T up to rounding: bf16(r * g) * s in place of bf16(r * s * g), the
// sums in a fixed order (the same bits every run).
struct GemvNorm {
  const float* weight = nullptr;  // g: [n], the norm's weight
  bf16* rows = nullptr;           // [m][n]
  float* sums = nullptr;          // [m][parts]
  int parts = 0;                  // row groups of the GEMV that leaves it: gemv_groups(m, n)
  float eps = 0;
};

// Row groups of launch_gemv for m tokens and n outputs (GemvNorm::parts).
int gemv_groups(int m, int n);

// y = x W^T stored as `store`. With `leaves` (store add_fp32, y the residual rows, leaves->
// parts == gemv_groups(m, n)), also the GemvNorm of the updated rows. With `takes`, x is
// takes->rows and every output is scaled as GemvNorm says (k is the norm's n).
void launch_gemv(const bf16* x, const bf16* w, void* y, GemvStore store, int m, int n, int k,
                 cudaStream_t stream, bool overlap = false, const GemvNorm* leaves = nullptr,
                 const GemvNorm* takes = nullptr);

// The gate|up projection with SiLU * mul fused: w_gate_up is [2n][k] (gate rows, then up rows);
// y[m][n] (bf16) = silu(x W_gate^T) * (x W_up^T), both products kept in fp32 until the result
// (scaled first with `takes`, as launch_gemv). Same requirements as launch_gemv.
void launch_gemv_silu_mul(const bf16* x, const bf16* w_gate_up, bf16* y, int m, int n, int k,
                          cudaStream_t stream, bool overlap = false,
                          const GemvNorm* takes = nullptr);

}  // namespace gpufrac::engine
