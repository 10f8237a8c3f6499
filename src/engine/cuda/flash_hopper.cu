// The flash-attention kernel for prompt chunks on Hopper (built for sm_90a only): the work of
// attention_fast.cu's flash kernel (causal, paged K/V through the block tables, GQA, masking by
// token_context, online softmax in the log2 domain, bf16 probabilities) with both products on
// the warpgroup MMA (wgmma.cuh): S = Q K^T as m64n64k16 with Q's fragments in registers and the
// K tile read from shared memory by the tensor cores, O += P V as m64n128k16 with P from the
// registers S was computed in and V read from shared memory transposed. One block (one
// warpgroup, 128 threads) per (sequence, 64-row query tile, query head); warp w owns rows
// 16w..16w+15. K/V tiles of 64 keys go through two shared-memory stages (cp.async, 64 KB per
// block) in wgmma's 128-byte swizzled layout.
#include "engine/cuda/attention_internal.cuh"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/kernel_launch.cuh"
#include "engine/cuda/wgmma.cuh"

namespace gpufrac::engine {

namespace {

constexpr int kHeadDim = 128;
constexpr int kRows = 64;      // query rows per block: the warpgroup's M
constexpr int kKeys = 64;      // keys per K/V tile
constexpr int kThreads = 128;  // one warpgroup
constexpr int kBlocksPerSm = 2;
// A tile is 64 keys x 128 dims as two blocks of 64 dims (8 KB: 64 rows of 128 bytes).
constexpr int kRowBytes = 128;
constexpr int kBlockBytes = kKeys * kRowBytes;
constexpr int kTileBytes = 2 * kBlockBytes;
constexpr int kStageBytes = 2 * kTileBytes;  // K, then V
constexpr int kGroupBytes = 8 * kRowBytes;   // one swizzle atom
constexpr int kSharedBytes = 2 * kStageBytes + 1024;  // two stages, room to align them

// Shared-window byte offset of 16-byte chunk `chunk` (0..15: dims 8 chunk..8 chunk + 7) of
// key `key` in a tile.
__device__ __forceinline__ uint32_t tile_offset(int key, int chunk) {
  return uint32_t((chunk >> 3) * kBlockBytes + key * kRowBytes + (((chunk & 7) ^ (key & 7)) << 4));
}

// Starts the copies of positions [t0, t0 + kKeys) of one KV head into the K and V tiles of the
// stage at shared address `stage`; positions at or past `end` are zero-filled (a masked key's
// probability is 0, and 0 times a zero V stays 0).
__device__ __forceinline__ void load_tiles(const AttentionParams& p, const int32_t* table,
                                           int kv_head, int t0, int end, uint32_t stage) {
  const int block_shift = __ffs(p.block_size) - 1;
  const int64_t block_elements = int64_t(p.num_kv_heads) * p.block_size * kHeadDim;
  const int64_t head_offset = int64_t(kv_head) * p.block_size * kHeadDim;
#pragma unroll
  for (int i = 0; i < kKeys * 16 / kThreads; ++i) {
    const int c = int(threadIdx.x) + i * kThreads;
    const int key = c >> 4, chunk = c & 15;
    const int t = t0 + key;
    const uint32_t k_dst = stage + tile_offset(key, chunk), v_dst = k_dst + kTileBytes;
    if (t < end) {
      const int64_t at = int64_t(table[t >> block_shift]) * block_elements + head_offset +
                         (t & (p.block_size - 1)) * kHeadDim + chunk * 8;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(k_dst),
                   "l"(p.k_cache + at));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(v_dst),
                   "l"(p.v_cache + at));
    } else {
      asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(k_dst), "r"(0));
      asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(v_dst), "r"(0));
    }
  }
  cp_async_commit();
}

__global__ void __launch_bounds__(kThreads, kBlocksPerSm) flash_hopper_kernel(AttentionParams p) {
  wait_for_previous_grid();
  allow_next_grid_launch();
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  __shared__ int s_kv_end;
  const uint32_t stages =
      (static_cast<uint32_t>(__cvta_generic_to_shared(shared_bytes)) + 1023u) & ~1023u;

  const int seq = p.first_flash_seq + int(blockIdx.x);
  const int q_begin = p.seq_query_start[seq];
  const int q_count = p.seq_query_start[seq + 1] - q_begin;
  // The last query tiles (the longest causal ranges) are launched first.
  const int tile_row0 = (gridDim.z - 1 - blockIdx.z) * kRows;
  if (q_count < kFlashMinQueries || tile_row0 >= q_count) return;  // uniform over the block
  const int head = blockIdx.y;
  const int kv_head = head / (p.num_heads / p.num_kv_heads);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t4 = lane & 3;

  if (threadIdx.x == 0) s_kv_end = 0;
  __syncthreads();
  if (threadIdx.x < kRows && tile_row0 + int(threadIdx.x) < q_count) {
    atomicMax(&s_kv_end, p.token_context[q_begin + tile_row0 + threadIdx.x]);
  }
  __syncthreads();
  const int kv_end = s_kv_end;
  const int32_t* table = p.block_tables + int64_t(seq) * p.header->table_width;
  if (kv_end > 0) load_tiles(p, table, kv_head, 0, kv_end, stages);

  const int r_lo = tile_row0 + warp * 16 + g, r_hi = r_lo + 8;  // rows within the sequence
  const bool lo_ok = r_lo < q_count, hi_ok = r_hi < q_count;
  const int ctx_lo = lo_ok ? p.token_context[q_begin + r_lo] : 0;
  const int ctx_hi = hi_ok ? p.token_context[q_begin + r_hi] : 0;

  constexpr int kSteps = kHeadDim / 16;  // k steps of Q K^T
  uint32_t qf[kSteps][4];
  {
    const bf16* q_lo = p.q + (int64_t(q_begin + r_lo) * p.num_heads + head) * kHeadDim;
    const bf16* q_hi = p.q + (int64_t(q_begin + r_hi) * p.num_heads + head) * kHeadDim;
#pragma unroll
    for (int st = 0; st < kSteps; ++st) {
      const int col = st * 16 + 2 * t4;
      qf[st][0] = lo_ok ? load_u32(q_lo + col) : 0u;
      qf[st][1] = hi_ok ? load_u32(q_hi + col) : 0u;
      qf[st][2] = lo_ok ? load_u32(q_lo + col + 8) : 0u;
      qf[st][3] = hi_ok ? load_u32(q_hi + col + 8) : 0u;
    }
  }

  float o[kHeadDim / 2];  // O: column 8n + 2t4 + (i & 1) of row g + 8 (i >> 1) at o[4n + i]
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) o[i] = 0.0f;
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.0f, l_hi = 0.0f;
  const float scale = p.scale * kLog2e;  // scores in the log2 domain

  for (int kv0 = 0, stage = 0; kv0 < kv_end; kv0 += kKeys, stage ^= 1) {
    const uint32_t ks = stages + uint32_t(stage * kStageBytes), vs = ks + kTileBytes;
    if (kv0 + kKeys < kv_end) {
      load_tiles(p, table, kv_head, kv0 + kKeys, kv_end, stages + uint32_t((stage ^ 1) * kStageBytes));
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    fence_shared_for_wgmma();
    __syncthreads();

    float s[kKeys / 2];  // S: as O, 8 columns of keys per n
    wgmma_fence();
#pragma unroll
    for (int st = 0; st < kSteps; ++st) {
      const uint32_t at = ks + uint32_t((st >> 2) * kBlockBytes + (st & 3) * 32);
      wgmma_m64n64k16<0>(s, qf[st], wgmma_descriptor(at, 16, kGroupBytes), st > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();

    // Scores stay unscaled until the exponent (scale > 0 keeps the maximum); a tile that every
    // row of the warp sees whole is not masked.
    const bool whole_tile = __all_sync(0xffffffffu, kv0 + kKeys <= min(ctx_lo, ctx_hi));
    float max_lo = -INFINITY, max_hi = -INFINITY;
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) {
      if (!whole_tile) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int key = kv0 + n * 8 + 2 * t4 + (i & 1);
          if (key >= (i < 2 ? ctx_lo : ctx_hi)) s[4 * n + i] = -INFINITY;
        }
      }
      max_lo = fmaxf(max_lo, fmaxf(s[4 * n], s[4 * n + 1]));
      max_hi = fmaxf(max_hi, fmaxf(s[4 * n + 2], s[4 * n + 3]));
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
    for (int n = 0; n < kKeys / 8; ++n) {
      s[4 * n] = exp2_approx(fmaf(s[4 * n], scale, -base_lo));
      s[4 * n + 1] = exp2_approx(fmaf(s[4 * n + 1], scale, -base_lo));
      s[4 * n + 2] = exp2_approx(fmaf(s[4 * n + 2], scale, -base_hi));
      s[4 * n + 3] = exp2_approx(fmaf(s[4 * n + 3], scale, -base_hi));
      sum_lo += s[4 * n] + s[4 * n + 1];
      sum_hi += s[4 * n + 2] + s[4 * n + 3];
    }
    l_lo = l_lo * corr_lo + sum_lo;  // this thread's columns; the quad sums at the end
    l_hi = l_hi * corr_hi + sum_hi;
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n) {
      o[4 * n] *= corr_lo;
      o[4 * n + 1] *= corr_lo;
      o[4 * n + 2] *= corr_hi;
      o[4 * n + 3] *= corr_hi;
    }

    // O += P V: P's accumulator columns 16kk..16kk+15 are the A fragments of k step kk.
    uint32_t pa[kKeys / 16][4];
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      pa[kk][0] = pack_bf16x2(s[8 * kk], s[8 * kk + 1]);
      pa[kk][1] = pack_bf16x2(s[8 * kk + 2], s[8 * kk + 3]);
      pa[kk][2] = pack_bf16x2(s[8 * kk + 4], s[8 * kk + 5]);
      pa[kk][3] = pack_bf16x2(s[8 * kk + 6], s[8 * kk + 7]);
    }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      const uint32_t at = vs + uint32_t(kk * 16 * kRowBytes);
      wgmma_m64n128k16<1>(o, pa[kk], wgmma_descriptor(at, kBlockBytes, kGroupBytes), 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
    __syncthreads();  // this stage is refilled next
  }

  float sum_lo = l_lo, sum_hi = l_hi;
#pragma unroll
  for (int offset = 1; offset <= 2; offset <<= 1) {
    sum_lo += __shfl_xor_sync(0xffffffffu, sum_lo, offset);
    sum_hi += __shfl_xor_sync(0xffffffffu, sum_hi, offset);
  }
  const float inv_lo = sum_lo > 0 ? 1.0f / sum_lo : 0.0f;
  const float inv_hi = sum_hi > 0 ? 1.0f / sum_hi : 0.0f;
  bf16* out_lo = p.out + (int64_t(q_begin + r_lo) * p.num_heads + head) * kHeadDim + 2 * t4;
  bf16* out_hi = p.out + (int64_t(q_begin + r_hi) * p.num_heads + head) * kHeadDim + 2 * t4;
#pragma unroll
  for (int n = 0; n < kHeadDim / 8; ++n) {
    if (lo_ok) {
      *reinterpret_cast<__nv_bfloat162*>(out_lo + n * 8) =
          __floats2bfloat162_rn(o[4 * n] * inv_lo, o[4 * n + 1] * inv_lo);
    }
    if (hi_ok) {
      *reinterpret_cast<__nv_bfloat162*>(out_hi + n * 8) =
          __floats2bfloat162_rn(o[4 * n + 2] * inv_hi, o[4 * n + 3] * inv_hi);
    }
  }
}

// Whether the current device runs this file's code (an sm_90a image), asked once per process.
bool hopper_code_runs() {
  static const bool runs = [] {
    cudaFuncAttributes attributes{};
    const cudaError_t status = cudaFuncGetAttributes(&attributes, flash_hopper_kernel);
    if (status != cudaSuccess) (void)cudaGetLastError();  // no image: not an error to keep
    return status == cudaSuccess;
  }();
  return runs;
}

}  // namespace

bool launch_flash_hopper(const AttentionParams& p, cudaStream_t stream) {
  if (!p.hopper_flash || p.head_dim != kHeadDim || !hopper_code_runs()) return false;
  static const cudaError_t raised = cudaFuncSetAttribute(
      flash_hopper_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
  GPUFRAC_CUDA_CHECK(raised);
  dim3 grid(p.num_seqs - p.first_flash_seq, p.num_heads, (p.max_queries + kRows - 1) / kRows);
  launch_kernel(flash_hopper_kernel, grid, dim3(kThreads), kSharedBytes, stream, p.overlap, p);
  return true;
}

}  // namespace gpufrac::engine
