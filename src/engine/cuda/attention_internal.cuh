// What the attention translation units share (attention.cu: the simple kernel, split merging
// and the dispatch; attention_fast.cu: the flash prefill and tiled decode kernels;
// flash_hopper.cu: the flash kernel on Hopper's warpgroup MMA). Included by those .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/cuda/attention.h"

namespace gpufrac::engine {

constexpr int kMaxGroup = 8;  // query heads per KV head handled by one block
// Blocks of the fast decode kernel resident per SM (its launch bounds): attention_splits plans
// the grid in waves of this many blocks per SM.
constexpr int kDecodeBlocksPerSm = 3;
// Decode blocks per SM beside the flash kernel of a step with prompt chunks (attention_splits):
// two one-head flash blocks per SM (70 KB of shared memory and 168 registers per thread each)
// leave room for one decode block (70 KB, ~150 registers) until they finish.
constexpr int kDecodeBlocksBesideFlash = 1;
// Blocks per SM of the decode kernel with three K/V stages (decode_streams_whole_contexts).
constexpr int kWholeContextBlocksPerSm = 2;
// Blocks of the fast decode kernel with `stages` K/V stages resident per SM (its launch bounds).
__host__ __device__ constexpr int decode_blocks_per_sm(int stages) {
  return stages == 3 ? kWholeContextBlocksPerSm : kDecodeBlocksPerSm;
}
constexpr float kLog2e = 1.4426950408889634f;

// True when row r's sequence `seq` has at least `min_queries` rows this step (the flash kernel
// owns it).
__device__ __forceinline__ bool row_is_flash(const AttentionParams& p, int seq, int min_queries) {
  return p.seq_query_start[seq + 1] - p.seq_query_start[seq] >= min_queries;
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ uint32_t load_u32(const bf16* src) {
  return *reinterpret_cast<const uint32_t*>(src);
}

// 2^x in one instruction (ex2.approx.ftz: results below 2^-126 flush to 0, far below the bf16
// rounding of the probabilities that use it); 2^-inf = 0.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// The two flash kernels' online softmax, for one thread's two query rows in the MMA result
// layout (mma.sync m16n8k16 and wgmma alike: lane 4g + t4 holds columns 8n + 2t4 and + 1 of rows
// g, "lo", and g + 8, "hi"). s(n, i) is score i of column tile n (i 0, 1: row lo; 2, 3: row hi),
// unscaled, for keys kv0 + 8n + 2t4 + (i & 1). Masks keys at or past ctx_lo / ctx_hi unless
// whole_tile, updates the running max m (log2 domain, `scale` applied here) and this thread's
// partial sums l, leaves the probabilities in s and returns O's rescale factors (lo, hi).
template <int kTiles, typename Scores>
__device__ __forceinline__ float2 flash_softmax_rows(Scores s, int kv0, int t4, int ctx_lo,
                                                     int ctx_hi, bool whole_tile, float scale,
                                                     float& m_lo, float& m_hi, float& l_lo,
                                                     float& l_hi) {
  float max_lo = -INFINITY, max_hi = -INFINITY;
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    if (!whole_tile) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int key = kv0 + n * 8 + 2 * t4 + (i & 1);
        if (key >= (i < 2 ? ctx_lo : ctx_hi)) s(n, i) = -INFINITY;
      }
    }
    max_lo = fmaxf(max_lo, fmaxf(s(n, 0), s(n, 1)));
    max_hi = fmaxf(max_hi, fmaxf(s(n, 2), s(n, 3)));
  }
  max_lo *= scale;
  max_hi *= scale;
#pragma unroll
  for (int offset = 1; offset <= 2; offset <<= 1) {
    max_lo = fmaxf(max_lo, __shfl_xor_sync(0xffffffffu, max_lo, offset));
    max_hi = fmaxf(max_hi, __shfl_xor_sync(0xffffffffu, max_hi, offset));
  }
  const float new_lo = fmaxf(m_lo, max_lo), new_hi = fmaxf(m_hi, max_hi);
  const float base_lo = new_lo == -INFINITY ? 0.0f : new_lo;  // all masked so far: p = 0
  const float base_hi = new_hi == -INFINITY ? 0.0f : new_hi;
  const float corr_lo = exp2f(m_lo - base_lo), corr_hi = exp2f(m_hi - base_hi);
  m_lo = new_lo;
  m_hi = new_hi;
  float sum_lo = 0.0f, sum_hi = 0.0f;
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    s(n, 0) = exp2_approx(fmaf(s(n, 0), scale, -base_lo));
    s(n, 1) = exp2_approx(fmaf(s(n, 1), scale, -base_lo));
    s(n, 2) = exp2_approx(fmaf(s(n, 2), scale, -base_hi));
    s(n, 3) = exp2_approx(fmaf(s(n, 3), scale, -base_hi));
    sum_lo += s(n, 0) + s(n, 1);
    sum_hi += s(n, 2) + s(n, 3);
  }
  l_lo = l_lo * corr_lo + sum_lo;  // this thread's columns; the quad sums at the end
  l_hi = l_hi * corr_hi + sum_hi;
  return make_float2(corr_lo, corr_hi);
}

// The two flash kernels' output for one thread's two query rows (the layout above): the partial
// sums l reduced over the row's four lanes, O / sum as bf16 (0 where the sum is 0) at out_lo and
// out_hi (the row's head, plus 2 t4) where the row exists. o(n, i) as s(n, i) above, over the
// kDimTiles column tiles of the head.
template <int kDimTiles, typename Outputs>
__device__ __forceinline__ void flash_store_rows(Outputs o, float l_lo, float l_hi, bf16* out_lo,
                                                 bf16* out_hi, bool lo_ok, bool hi_ok) {
#pragma unroll
  for (int offset = 1; offset <= 2; offset <<= 1) {
    l_lo += __shfl_xor_sync(0xffffffffu, l_lo, offset);
    l_hi += __shfl_xor_sync(0xffffffffu, l_hi, offset);
  }
  const float inv_lo = l_lo > 0 ? 1.0f / l_lo : 0.0f;
  const float inv_hi = l_hi > 0 ? 1.0f / l_hi : 0.0f;
#pragma unroll
  for (int n = 0; n < kDimTiles; ++n) {
    if (lo_ok) {
      *reinterpret_cast<__nv_bfloat162*>(out_lo + n * 8) =
          __floats2bfloat162_rn(o(n, 0) * inv_lo, o(n, 1) * inv_lo);
    }
    if (hi_ok) {
      *reinterpret_cast<__nv_bfloat162*>(out_hi + n * 8) =
          __floats2bfloat162_rn(o(n, 2) * inv_hi, o(n, 3) * inv_hi);
    }
  }
}

// The context end of a flash tile's query rows: the largest token_context of rows [row0,
// row0 + rows) of the sequence whose queries start at row q_begin (rows at or past q_count
// skipped). Every lane of the calling warp calls it and gets the result (no block barrier).
__device__ __forceinline__ int flash_tile_context_end(const AttentionParams& p, int q_begin,
                                                      int row0, int rows, int q_count) {
  const int lane = int(threadIdx.x) & 31;
  int end = 0;
  for (int r = row0 + lane; r < min(row0 + rows, q_count); r += 32) {
    end = max(end, p.token_context[q_begin + r]);
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    end = max(end, __shfl_xor_sync(0xffffffffu, end, offset));
  }
  return end;
}

// K/V stages of the fast decode kernel for p's decode rows: three in a decode-only step of one
// split that streams whole contexts (decode_streams_whole_contexts), two otherwise.
int decode_kernel_stages(const AttentionParams& p);

// Merges split partials into p.out for every row not owned by the flash kernel
// (flash_min_queries 0: every row).
void launch_combine_splits(const AttentionParams& p, int flash_min_queries, cudaStream_t stream);

// Whether p's prompt chunks take the flash kernel on Hopper's warpgroup MMA (flash_hopper.cu):
// p.hopper_flash, head_dim 128, query heads that pair up on their KV heads, a block size of 8
// to 64 and a device that runs its code (sm_90).
bool hopper_flash_runs(const AttentionParams& p);
// That kernel's grid for p: one block per 64-row tile of two query heads, or with p.flash_sms > 0
// at most that many blocks, each taking the same number of tiles (but the last).
int hopper_flash_blocks(const AttentionParams& p);
// Launches that kernel for p's prompt chunks (requires hopper_flash_runs(p)).
void launch_flash_hopper(const AttentionParams& p, cudaStream_t stream);

// kFast (attention_fast.cu): flash kernel for long sequences, tiled decode kernel for the rest,
// split merging. Requires fast_attention_supported().
void launch_fast_attention(const AttentionParams& p, cudaStream_t stream);

}  // namespace gpufrac::engine
