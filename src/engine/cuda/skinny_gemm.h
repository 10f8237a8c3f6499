// A weight-streaming GEMM on the tensor cores for the 5-32 tokens of a decode step, where the
// fp32 GEMV (gemv.h) runs out of arithmetic and cuBLASLt keeps too few bytes in flight:
// y[m][n] = x[m][k] W[n][k]^T, bf16 x and W (row-major, as gemm.h), fp32 accumulation.
//
// A block of 4 warps takes 64 weight rows (16 per warp: the M of mma.sync m16n8k16, the tokens
// its N in tiles of 8) over one k slice: the slices split k so that the grid holds about
// SkinnyForm::blocks_per_sm blocks per SM the process may use. The weights stream straight into
// registers (16-byte streaming loads, batches of SkinnyForm::steps_per_batch steps of 32 k; no
// shared memory, so a block fits beside its neighbours) or through a ring of shared-memory
// stages (cp.async, 32 KB a block); either way the first are requested before waiting for the
// previous kernel. x is read through L1, which the block's warps share. Each thread's 16 bytes
// of a row and of a token are the same 8 k, so both fragments come straight from the loads (k
// permuted alike inside each step of 32).
//
// Outputs: `splits` fp32 partials [split][m][n], part_stride m * n apart, which the consumer sums
// (GemmOutput, device_math.cuh: read_gemm_output; launch_rmsnorm adds them into the residual);
// or, with SiLU * mul fused (gate|up, one split: the k slice is all of k), bf16 [m][n].
//
// Requirements (checked): 1 <= m <= kSkinnyMaxTokens, k a multiple of 32, x, W and y 16-byte
// aligned. Asynchronous on `stream`, legal inside CUDA graph capture; `overlap` as gemv.h.
#pragma once

#include <cuda_runtime.h>

#include "engine/cuda/cuda_types.h"

namespace gpufrac::engine {

constexpr int kSkinnyMaxTokens = 32;

// How the kernel streams its weights. The default is what the runner launches.
struct SkinnyForm {
  // false: straight into registers, steps_per_batch (4 or 8) steps of 32 k per thread and batch;
  // true: through a ring of shared-memory stages filled by cp.async, steps_per_batch (6) steps
  // in flight.
  bool through_shared = false;
  int steps_per_batch = 8;
  int blocks_per_sm = 2;  // 1 to 4: the k splits aim the grid at this many blocks per SM
};
// The forms gpufrac_cuda_bench's per-shape table times side by side and the tests check (the
// default first), so that one build answers which form to keep.
inline constexpr SkinnyForm kSkinnyFormsCompared[] = {{false, 8, 2}, {false, 8, 3}, {false, 4, 2},
                                                      {false, 4, 4}, {true, 6, 2},  {true, 6, 4}};

// Whether the kernel takes m tokens with k columns (the pointers' alignment aside).
bool skinny_gemm_supports(int m, int k);

// The k slices (partials) launch_skinny_gemm writes for an (n, k) layer on the current device
// (1 where it does not take k).
int skinny_gemm_splits(int n, int k, const SkinnyForm& form = {});

// y = x W^T as skinny_gemm_splits(n, k) fp32 partials at `partials` (room for splits * m * n
// floats). Returns where they are.
GemmOutput launch_skinny_gemm(const bf16* x, const bf16* w, float* partials, int m, int n, int k,
                              cudaStream_t stream, bool overlap = false,
                              const SkinnyForm& form = {});

// The gate|up projection with SiLU * mul fused: w_gate_up is [2n][k] (gate rows, then up rows);
// y[m][n] (bf16) = silu(x W_gate^T) * (x W_up^T), both products in fp32 until the result.
void launch_skinny_gemm_silu_mul(const bf16* x, const bf16* w_gate_up, bf16* y, int m, int n, int k,
                                 cudaStream_t stream, bool overlap = false,
                                 const SkinnyForm& form = {});

}  // namespace gpufrac::engine
