// The flash-attention kernel for prompt chunks on Hopper (built for sm_90a only): the work of
// attention_fast.cu's flash kernel (causal, paged K/V through the block tables, GQA, masking by
// token_context, online softmax in the log2 domain, bf16 probabilities) with both products on
// the warpgroup MMA (wgmma.cuh): S = Q K^T as m64n64k16 with Q and the K tile read from shared
// memory by the tensor cores, O += P V as m64n128k16 with P from the registers S was computed in
// and V read transposed. A warpgroup (128 threads) takes 64 query rows of one head (warp w rows
// 16w..16w+15); a block holds one or two warpgroups (AttentionParams::hopper_flash_heads: two
// query heads of one KV head then share the K/V tiles). Q and the K/V tiles of 64 keys are
// copied (cp.async, through the block tables) into wgmma's 128-byte swizzled layout, the tiles
// through kStages stages. Not timed on a GPU yet (src/engine/cuda/NOTES.md, version 13).

#include "engine/cuda/attention_internal.cuh"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/kernel_launch.cuh"
#include "engine/cuda/wgmma.cuh"

namespace gpufrac::engine {

namespace {

constexpr int kHeadDim = 128;
constexpr int kRows = 64;               // query rows per warpgroup: its M
constexpr int kKeys = 64;               // keys per K/V tile
constexpr int kGroupThreads = 128;      // one warpgroup
// A tile is 64 keys x 128 dims as two blocks of 64 dims (8 KB: 64 rows of 128 bytes).
constexpr int kRowBytes = 128;
constexpr int kBlockBytes = kKeys * kRowBytes;
constexpr int kTileBytes = 2 * kBlockBytes;
constexpr int kStageBytes = 2 * kTileBytes;  // K, then V
constexpr int kAtomBytes = 8 * kRowBytes;   // one swizzle atom
// K/V stages in shared memory for kGroups warpgroups per block: three fit two one-warpgroup
// blocks per SM (113 KB each), four one block of two warpgroups.
template <int kGroups>
__host__ __device__ constexpr int flash_stages() {
  return kGroups == 1 ? 3 : 4;
}
// Dynamic shared memory (the kernel's only shared memory, so it starts 1024-byte aligned): each
// warpgroup's Q tile (64 rows x 128 dims, the layout of a K tile), the stages, the tile's
// context end.
template <int kGroups>
__host__ __device__ constexpr int flash_shared_bytes() {
  return kGroups * kTileBytes + flash_stages<kGroups>() * kStageBytes + 16;
}

// Shared-window byte offset of 16-byte chunk `chunk` (0..15: dims 8 chunk..8 chunk + 7) of
// key `key` in a tile.
__device__ __forceinline__ uint32_t tile_offset(int key, int chunk) {
  return uint32_t((chunk >> 3) * kBlockBytes + key * kRowBytes + (((chunk & 7) ^ (key & 7)) << 4));
}

// Starts the copies (every thread of the block, kThreads of them) of positions [t0, t0 + kKeys)
// of one KV head into the K and V tiles of the stage at shared address `stage`, and commits them
// as one group (an empty one when t0 >= end); positions at or past `end` are zero-filled (a
// masked key's probability is 0, and 0 times a zero V stays 0).
template <int kThreads>
__device__ __forceinline__ void load_tiles(const AttentionParams& p, const int32_t* table,
                                           int kv_head, int t0, int end, uint32_t stage) {
  if (t0 < end) {
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
  }
  cp_async_commit();
}

// Starts the copies of this warpgroup's 64 query rows [row0, row0 + kRows) of head `head` (rows
// at or past `rows` zero-filled) into the Q tile at shared address `q_tile`; not committed.
__device__ __forceinline__ void load_queries(const AttentionParams& p, int first_row, int row0,
                                             int rows, int head, uint32_t q_tile) {
  const int lane = int(threadIdx.x) % kGroupThreads;
#pragma unroll
  for (int i = 0; i < kRows * 16 / kGroupThreads; ++i) {
    const int c = lane + i * kGroupThreads;
    const int row = c >> 4, chunk = c & 15;
    const uint32_t dst = q_tile + tile_offset(row, chunk);
    if (row0 + row < rows) {
      const bf16* src =
          p.q + (int64_t(first_row + row0 + row) * p.num_heads + head) * kHeadDim + chunk * 8;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
    } else {
      asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(dst), "r"(0));
    }
  }
}

// S = Q K^T for the Q and K tiles at shared addresses `q_tile`, `k_tile` (issued, committed, not
// waited for).
__device__ __forceinline__ void issue_scores(float (&s)[kKeys / 2], uint32_t q_tile,
                                             uint32_t k_tile) {
  constexpr int kSteps = kHeadDim / 16;
  uint64_t q_desc[kSteps], k_desc[kSteps];
#pragma unroll
  for (int st = 0; st < kSteps; ++st) {
    const uint32_t offset = uint32_t((st >> 2) * kBlockBytes + (st & 3) * 32);
    q_desc[st] = wgmma_descriptor(q_tile + offset, 16, kAtomBytes);
    k_desc[st] = wgmma_descriptor(k_tile + offset, 16, kAtomBytes);
  }
  wgmma_fence();
#pragma unroll
  for (int st = 0; st < kSteps; ++st) wgmma_m64n64k16_ss(s, q_desc[st], k_desc[st], st > 0);
  wgmma_commit();
}

// kGroups warpgroups per block, each one query head of the same KV head (heads kGroups y ..
// kGroups y + kGroups - 1), all reading the same K/V tiles, copied kStages - 1 tiles ahead. Per
// tile j a warpgroup issues S(j) and P(j - 1) V(j - 1) back to back, waits for S(j) only, runs
// the softmax of S(j) while P V runs, and only after P V has finished writes P(j) and rescales O:
// no register a product in flight reads is written meanwhile, so ptxas keeps the products
// asynchronous (FlashAttention-3's order).
template <int kGroups>
__global__ void __launch_bounds__(kGroupThreads * kGroups, kGroups == 1 ? 2 : 1)
    flash_hopper_kernel(AttentionParams p) {
  constexpr int kThreads = kGroupThreads * kGroups;
  constexpr int kStages = flash_stages<kGroups>();
  wait_for_previous_grid();
  allow_next_grid_launch();
  extern __shared__ __align__(1024) unsigned char shared_bytes[];
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(shared_bytes));
  if (base % 1024 != 0) __trap();  // the swizzle atoms need it
  int& s_kv_end =
      *reinterpret_cast<int*>(shared_bytes + kGroups * kTileBytes + kStages * kStageBytes);
  const int group = int(threadIdx.x) / kGroupThreads;
  const uint32_t q_tile = base + uint32_t(group * kTileBytes);
  const uint32_t stages = base + uint32_t(kGroups * kTileBytes);
  auto stage_at = [&](int tile) { return stages + uint32_t((tile % kStages) * kStageBytes); };

  const int seq = p.first_flash_seq + int(blockIdx.x);
  const int q_begin = p.seq_query_start[seq];
  const int q_count = p.seq_query_start[seq + 1] - q_begin;
  // The last query tiles (the longest causal ranges) are launched first.
  const int tile_row0 = (gridDim.z - 1 - blockIdx.z) * kRows;
  if (q_count < kFlashMinQueries || tile_row0 >= q_count) return;  // uniform over the block
  const int head = blockIdx.y * kGroups + group;
  const int kv_head = head / (p.num_heads / p.num_kv_heads);
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const int g = lane >> 2, t4 = lane & 3;

  const int kv_end = flash_tile_context_end(p, q_begin, tile_row0, kRows, q_count, s_kv_end);
  const int tiles = (kv_end + kKeys - 1) / kKeys;
  const int32_t* table = p.block_tables + int64_t(seq) * p.header->table_width;
  load_queries(p, q_begin, tile_row0, q_count, head, q_tile);  // in tile 0's group
#pragma unroll
  for (int t = 0; t + 1 < kStages; ++t) {
    load_tiles<kThreads>(p, table, kv_head, t * kKeys, kv_end, stage_at(t));
  }

  const int r_lo = tile_row0 + warp * 16 + g, r_hi = r_lo + 8;  // rows within the sequence
  const bool lo_ok = r_lo < q_count, hi_ok = r_hi < q_count;
  const int ctx_lo = lo_ok ? p.token_context[q_begin + r_lo] : 0;
  const int ctx_hi = hi_ok ? p.token_context[q_begin + r_hi] : 0;

  float o[kHeadDim / 2];  // O: column 8n + 2t4 + (i & 1) of row g + 8 (i >> 1) at o[4n + i]
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) o[i] = 0.0f;
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.0f, l_hi = 0.0f;
  const float scale = p.scale * kLog2e;  // scores in the log2 domain
  uint32_t pa[kKeys / 16][4];  // P of the last tile whose softmax is done, as A fragments
  // The softmax of S(j): masks, updates the running max and sums, rescales O, and leaves P(j) in
  // pa. Called only while no product reads pa or O.
  auto softmax = [&](int j, float (&s)[kKeys / 2]) {
    const int kv0 = j * kKeys;
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
    const float base_lo = new_lo == -INFINITY ? 0.0f : new_lo;
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
    l_lo = l_lo * corr_lo + sum_lo;
    l_hi = l_hi * corr_hi + sum_hi;
    return make_float2(corr_lo, corr_hi);
  };
  auto finish = [&](float (&s)[kKeys / 2], float2 corr) {
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      pa[kk][0] = pack_bf16x2(s[8 * kk], s[8 * kk + 1]);
      pa[kk][1] = pack_bf16x2(s[8 * kk + 2], s[8 * kk + 3]);
      pa[kk][2] = pack_bf16x2(s[8 * kk + 4], s[8 * kk + 5]);
      pa[kk][3] = pack_bf16x2(s[8 * kk + 6], s[8 * kk + 7]);
    }
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n) {
      o[4 * n] *= corr.x;
      o[4 * n + 1] *= corr.x;
      o[4 * n + 2] *= corr.y;
      o[4 * n + 3] *= corr.y;
    }
  };
  auto issue_values = [&](int j) {
    const uint32_t vs = stage_at(j) + kTileBytes;
    uint64_t v_desc[kKeys / 16];
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      v_desc[kk] = wgmma_descriptor(vs + uint32_t(kk * 16 * kRowBytes), kBlockBytes, kAtomBytes);
    }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) wgmma_m64n128k16<1>(o, pa[kk], v_desc[kk], 1);
    wgmma_commit();
  };

  cp_async_wait<kStages - 2>();  // Q and tile 0
  fence_shared_for_wgmma();
  __syncthreads();
  load_tiles<kThreads>(p, table, kv_head, (kStages - 1) * kKeys, kv_end, stage_at(kStages - 1));
  if (tiles > 0) {
    float s[kKeys / 2];
    issue_scores(s, q_tile, stage_at(0));
    wgmma_wait<0>();
    finish(s, softmax(0, s));
  }
  // Tile j: issue S(j) and P(j - 1) V(j - 1) back to back, wait for S(j) only, run the softmax
  // while P V runs, then wait for it before P and O are written again.
  for (int j = 1; j < tiles; ++j) {
    cp_async_wait<kStages - 2>();  // tile j
    fence_shared_for_wgmma();
    __syncthreads();
    float s[kKeys / 2];
    issue_scores(s, q_tile, stage_at(j));
    issue_values(j - 1);
    wgmma_wait<1>();
    const float2 corr = softmax(j, s);
    wgmma_wait<0>();
    __syncthreads();  // every warpgroup is done with tile j - 1
    load_tiles<kThreads>(p, table, kv_head, (j + kStages - 1) * kKeys, kv_end,
                         stage_at(j + kStages - 1));
    finish(s, corr);
  }
  if (tiles > 0) issue_values(tiles - 1);
  wgmma_wait<0>();
  cp_async_wait<0>();  // no copy outlives the block

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
    const cudaError_t status = cudaFuncGetAttributes(&attributes, flash_hopper_kernel<1>);
    if (status != cudaSuccess) (void)cudaGetLastError();  // no image: not an error to keep
    return status == cudaSuccess;
  }();
  return runs;
}

template <int kGroups>
void launch_groups(const AttentionParams& p, cudaStream_t stream) {
  constexpr int kShared = flash_shared_bytes<kGroups>();
  static const cudaError_t raised = cudaFuncSetAttribute(
      flash_hopper_kernel<kGroups>, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared);
  GPUFRAC_CUDA_CHECK(raised);
  dim3 grid(p.num_seqs - p.first_flash_seq, p.num_heads / kGroups,
            (p.max_queries + kRows - 1) / kRows);
  launch_kernel(flash_hopper_kernel<kGroups>, grid, dim3(kGroupThreads * kGroups), kShared,
                stream, p.overlap, p);
}

}  // namespace

bool launch_flash_hopper(const AttentionParams& p, cudaStream_t stream) {
  if (p.hopper_flash_heads <= 0 || p.head_dim != kHeadDim || !hopper_code_runs()) return false;
  if (p.hopper_flash_heads == 2 && (p.num_heads / p.num_kv_heads) % 2 == 0) {
    launch_groups<2>(p, stream);
  } else {
    launch_groups<1>(p, stream);
  }
  return true;
}

}  // namespace gpufrac::engine
