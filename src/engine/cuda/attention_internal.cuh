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

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most `kPending` committed groups of this thread are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// The context end of a flash block's query rows: the largest token_context of rows [row0,
// row0 + rows) of the sequence whose queries start at row q_begin (rows at or past q_count
// skipped), reduced through `slot` in shared memory. Every thread of the block calls it (it
// syncs the block twice); needs blockDim.x >= rows.
__device__ __forceinline__ int flash_tile_context_end(const AttentionParams& p, int q_begin,
                                                      int row0, int rows, int q_count,
                                                      int& slot) {
  if (threadIdx.x == 0) slot = 0;
  __syncthreads();
  if (int(threadIdx.x) < rows && row0 + int(threadIdx.x) < q_count) {
    atomicMax(&slot, p.token_context[q_begin + row0 + threadIdx.x]);
  }
  __syncthreads();
  return slot;
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
// Launches that kernel for p's prompt chunks (requires hopper_flash_runs(p)).
void launch_flash_hopper(const AttentionParams& p, cudaStream_t stream);

// kFast (attention_fast.cu): flash kernel for long sequences, tiled decode kernel for the rest,
// split merging. Requires fast_attention_supported().
void launch_fast_attention(const AttentionParams& p, cudaStream_t stream);

}  // namespace gpufrac::engine
