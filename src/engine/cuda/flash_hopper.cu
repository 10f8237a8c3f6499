// The flash-attention kernel for prompt chunks on Hopper (built for sm_90a only): the work of
// attention_fast.cu's flash kernel (causal, paged K/V through the block tables, GQA, masking by
// token_context, online softmax in the log2 domain, bf16 probabilities) with both products on
// the warpgroup MMA (wgmma.cuh), at head_dim 128, a block size of 8 to 64 positions and query
// heads that pair up on their KV heads (launch_flash_hopper says so; otherwise the mma.sync
// kernel runs).
//
// A block takes 64 query rows of two query heads of one KV head and has three warpgroups: two
// consumers (one head each; warp w of a group rows 16w..16w+15) and a producer whose one thread
// copies the K/V tiles of 128 keys with the tensor memory accelerator (TMA: a box of block_size
// positions x 64 dims per KV-cache block and half of the dims, landing in wgmma's 128-byte
// swizzled layout) through three stages. Stage s's full barrier (an mbarrier) completes when its
// bytes have landed, its empty barrier when every consumer warp has finished the products that
// read it, so the consumers neither copy K/V nor meet at block barriers. The producer hands its
// registers to the consumers (setmaxnreg: 40 against 232 each).
//
// Per tile j a consumer issues S(j) = Q K^T (m64n128k16, Q and K from shared memory) and
// P(j - 1) V(j - 1) (m64n128k16, P from registers, V read transposed) back to back, waits for
// S(j) only, runs the softmax of S(j) while P V runs, and only after P V has finished writes P(j)
// and rescales O: no register a product in flight reads is written meanwhile, so ptxas keeps the
// products asynchronous (FlashAttention-3's order). The two consumers take turns to issue (named
// barriers 3 and 4), so that one's softmax runs while the other's products do. Q is copied once
// per block by its consumer (cp.async).

#include <cuda.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "engine/cuda/attention_internal.cuh"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device_math.cuh"
#include "engine/cuda/kernel_launch.cuh"
#include "engine/cuda/wgmma.cuh"

namespace gpufrac::engine {

namespace {

constexpr int kHeadDim = 128;
constexpr int kRows = 64;           // query rows per consumer warpgroup: its M
constexpr int kKeys = 128;          // keys per K/V tile: the N of S
constexpr int kStages = 3;          // K/V tiles in shared memory
constexpr int kGroupThreads = 128;  // one warpgroup
constexpr int kConsumerThreads = 2 * kGroupThreads;
constexpr int kThreads = kConsumerThreads + kGroupThreads;  // and the producer
// A tile of R rows (keys or queries) x 128 dims is two blocks of 64 dims, each R rows of 128
// bytes; 16-byte chunk c of row r sits at chunk c ^ (r & 7) (the 128-byte swizzle).
constexpr int kRowBytes = 128;
constexpr int kAtomBytes = 8 * kRowBytes;  // one swizzle atom: 8 rows
constexpr int kQTileBytes = 2 * kRows * kRowBytes;
constexpr int kKvTileBytes = 2 * kKeys * kRowBytes;
constexpr int kStageBytes = 2 * kKvTileBytes;  // K, then V
// Dynamic shared memory (the kernel's only shared memory, so it starts 1024-byte aligned): the
// two Q tiles, the stages, a full and an empty barrier per stage.
constexpr int kSharedBytes = 2 * kQTileBytes + kStages * kStageBytes + kStages * 16;

// Starts the copies (cp.async) of this warpgroup's 64 query rows [row0, row0 + kRows) of head
// `head` (rows at or past `rows` zero-filled) into the Q tile at shared address `q_tile`; not
// committed.
__device__ __forceinline__ void load_queries(const AttentionParams& p, int first_row, int row0,
                                             int rows, int head, uint32_t q_tile) {
  const int lane = int(threadIdx.x) % kGroupThreads;
#pragma unroll
  for (int i = 0; i < kRows * 16 / kGroupThreads; ++i) {
    const int c = lane + i * kGroupThreads;
    const int row = c >> 4, chunk = c & 15;
    const uint32_t dst = q_tile + uint32_t((chunk >> 3) * kRows * kRowBytes + row * kRowBytes +
                                           (((chunk & 7) ^ (row & 7)) << 4));
    if (row0 + row < rows) {
      const bf16* src =
          p.q + (int64_t(first_row + row0 + row) * p.num_heads + head) * kHeadDim + chunk * 8;
      cp_async_16(dst, src);
    } else {
      asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(dst), "r"(0));
    }
  }
}

// mbarriers (`bar`: a shared-window address).
__device__ __forceinline__ void mbarrier_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

// Waits until the phase with parity `parity` of `bar` has completed.
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, int parity) {
  asm volatile(
      "{\n.reg .pred done;\nwait_loop:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_loop;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Arrives on `bar` and adds `bytes` to the bytes its phase waits for.
__device__ __forceinline__ void mbarrier_expect_bytes(uint32_t bar, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}

// The tensor copy of the box at (column x, row y) of `map` into shared address `dst`, its bytes
// completing on `bar`.
__device__ __forceinline__ void tensor_copy(uint32_t dst, const CUtensorMap& map, int x, int y,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}

// The producer's tensor copies of positions [t0, t0 + kKeys) of KV head `kv_head` into the stage
// at `stage`: per KV-cache block and half of the dims a box of block_size rows at key offset
// (t - t0), whose 1024-byte aligned 8-row groups keep the tile's swizzle. Positions at or past
// `end` take the sequence's last block's data (finite: the pool is zeroed when it is backed) and
// are masked by the consumers.
__device__ __forceinline__ void copy_kv_tile(const AttentionParams& p, const int32_t* table,
                                             int kv_head, int t0, int end, uint32_t stage,
                                             uint32_t bar, const CUtensorMap& k_map,
                                             const CUtensorMap& v_map) {
  const int block_shift = __ffs(p.block_size) - 1;
  const int last_block = (end - 1) >> block_shift;
  for (int t = t0; t < t0 + kKeys; t += p.block_size) {
    const int row =
        (table[min(t >> block_shift, last_block)] * p.num_kv_heads + kv_head) * p.block_size;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const uint32_t dst = stage + uint32_t((half * kKeys + t - t0) * kRowBytes);
      tensor_copy(dst, k_map, half * 64, row, bar);
      tensor_copy(dst + kKvTileBytes, v_map, half * 64, row, bar);
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
    const uint32_t step = uint32_t((st & 3) * 32);  // 16 dims
    q_desc[st] = wgmma_descriptor(q_tile + (st >> 2) * kRows * kRowBytes + step, 16, kAtomBytes);
    k_desc[st] = wgmma_descriptor(k_tile + (st >> 2) * kKeys * kRowBytes + step, 16, kAtomBytes);
  }
  wgmma_fence();
#pragma unroll
  for (int st = 0; st < kSteps; ++st) wgmma_m64n128k16_ss(s, q_desc[st], k_desc[st], st > 0);
  wgmma_commit();
}

// One consumer warpgroup's 64 query rows of one head (this thread: rows r_lo and r_lo + 8 of the
// sequence): the running max and sum of the online softmax in the log2 domain, O in the wgmma D
// layout (column 8n + 2t4 + (i & 1) of row g + 8 (i >> 1) at o[4n + i]), and P of the last tile
// whose softmax is done as wgmma A fragments.
struct FlashRows {
  float o[kHeadDim / 2];
  uint32_t pa[kKeys / 16][4];
  float m_lo, m_hi, l_lo, l_hi, scale;
  int r_lo, ctx_lo, ctx_hi, t4;
  bool lo_ok, hi_ok;

  __device__ __forceinline__ FlashRows(const AttentionParams& p, int q_begin, int q_count,
                                       int tile_row0) {
    const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    t4 = lane & 3;
    r_lo = tile_row0 + warp * 16 + (lane >> 2);
    lo_ok = r_lo < q_count;
    hi_ok = r_lo + 8 < q_count;
    ctx_lo = lo_ok ? p.token_context[q_begin + r_lo] : 0;
    ctx_hi = hi_ok ? p.token_context[q_begin + r_lo + 8] : 0;
#pragma unroll
    for (int i = 0; i < kHeadDim / 2; ++i) o[i] = 0.0f;
    m_lo = m_hi = -INFINITY;
    l_lo = l_hi = 0.0f;
    scale = p.scale * kLog2e;
  }

  // The softmax of S(j) (tile j's scores): masks, updates the running max and sums, leaves the
  // probabilities in s and returns O's rescale factors. Touches no register a product reads.
  __device__ __forceinline__ float2 softmax(int j, float (&s)[kKeys / 2]) {
    const int kv0 = j * kKeys;
    const bool whole_tile = __all_sync(0xffffffffu, kv0 + kKeys <= min(ctx_lo, ctx_hi));
    return flash_softmax_rows<kKeys / 8>([&](int n, int i) -> float& { return s[4 * n + i]; }, kv0,
                                         t4, ctx_lo, ctx_hi, whole_tile, scale, m_lo, m_hi, l_lo,
                                         l_hi);
  }

  // P(j) into pa and O rescaled: only while no product reads pa or O.
  __device__ __forceinline__ void finish(const float (&s)[kKeys / 2], float2 corr) {
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
  }

  // O += P V for the V tile at shared address v_tile (issued, committed, not waited for).
  __device__ __forceinline__ void issue_values(uint32_t v_tile) {
    uint64_t v_desc[kKeys / 16];
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      v_desc[kk] =
          wgmma_descriptor(v_tile + uint32_t(kk * 16 * kRowBytes), kKeys * kRowBytes, kAtomBytes);
    }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) wgmma_m64n128k16<1>(o, pa[kk], v_desc[kk], 1);
    wgmma_commit();
  }

  // O / sum as bf16 into p.out for head `head` of the sequence whose queries start at q_begin.
  __device__ __forceinline__ void store(const AttentionParams& p, int q_begin, int head) {
    bf16* out_lo = p.out + (int64_t(q_begin + r_lo) * p.num_heads + head) * kHeadDim + 2 * t4;
    flash_store_rows<kHeadDim / 8>([&](int n, int i) { return o[4 * n + i]; }, l_lo, l_hi, out_lo,
                                   out_lo + int64_t(8) * p.num_heads * kHeadDim, lo_ok, hi_ok);
  }
};

// One work item of the kernel: 64 query rows of a prompt chunk and two query heads of one KV head.
// Item w takes chunk w % chunks, head pair (w / chunks) % pairs and the (w / (chunks x pairs))-th
// longest row tile, so that the longest tiles go first.
struct FlashItem {
  int seq, q_begin, q_count, tile_row0, pair, kv_head;

  __device__ __forceinline__ FlashItem(const AttentionParams& p, int w, int row_tiles) {
    const int chunks = p.num_seqs - p.first_flash_seq, pairs = p.num_heads / 2;
    seq = p.first_flash_seq + w % chunks;
    pair = (w / chunks) % pairs;
    tile_row0 = (row_tiles - 1 - w / (chunks * pairs)) * kRows;
    q_begin = p.seq_query_start[seq];
    q_count = p.seq_query_start[seq + 1] - q_begin;
    kv_head = pair * 2 / (p.num_heads / p.num_kv_heads);
  }
  // Whether the item has rows: a sequence of the flash kernel and a tile inside its chunk.
  __device__ __forceinline__ bool has_rows() const {
    return q_count >= kFlashMinQueries && tile_row0 < q_count;
  }
  // The positions the item's rows read (every lane of the calling warp calls it).
  __device__ __forceinline__ int context_end(const AttentionParams& p) const {
    return flash_tile_context_end(p, q_begin, tile_row0, kRows, q_count);
  }
};

// See the top of the file. Grid: one block per work item (FlashItem), or fewer blocks that take
// items w, w + gridDim.x, ... (hopper_flash_blocks): the stages and their barriers run on across
// a block's items.
__global__ void __launch_bounds__(kThreads, 1)
    flash_hopper_kernel(AttentionParams p, const __grid_constant__ CUtensorMap k_map,
                        const __grid_constant__ CUtensorMap v_map, int items, int row_tiles) {
  wait_for_previous_grid();
  allow_next_grid_launch();
  extern __shared__ __align__(1024) unsigned char shared_bytes[];
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(shared_bytes));
  if (base % 1024 != 0) __trap();  // the swizzle atoms need it
  const uint32_t stages = base + uint32_t(2 * kQTileBytes);
  const uint32_t full = stages + uint32_t(kStages * kStageBytes), empty = full + 8 * kStages;
  auto stage_at = [&](int tile) { return stages + uint32_t((tile % kStages) * kStageBytes); };
  if (threadIdx.x == 0) {
    for (int st = 0; st < kStages; ++st) {
      mbarrier_init(full + 8 * st, 1);
      mbarrier_init(empty + 8 * st, kConsumerThreads / 32);
    }
  }
  __syncthreads();  // publishes the barriers' initialization

  if (int(threadIdx.x) >= kConsumerThreads) {  // the producer warpgroup: its first warp
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (int(threadIdx.x) >= kConsumerThreads + 32) return;
    int copied = 0;  // tiles this block has copied, over its items
    for (int w = int(blockIdx.x); w < items; w += int(gridDim.x)) {
      const FlashItem item(p, w, row_tiles);
      if (!item.has_rows()) continue;
      const int kv_end = item.context_end(p);
      const int tiles = (kv_end + kKeys - 1) / kKeys;
      if (threadIdx.x == kConsumerThreads) {
        const int32_t* table = p.block_tables + int64_t(item.seq) * p.header->table_width;
        for (int j = copied; j < copied + tiles; ++j) {
          const int st = j % kStages;
          if (j >= kStages) mbarrier_wait(empty + 8 * st, (j / kStages - 1) & 1);
          mbarrier_expect_bytes(full + 8 * st, kStageBytes);
          copy_kv_tile(p, table, item.kv_head, (j - copied) * kKeys, kv_end, stage_at(j),
                       full + 8 * st, k_map, v_map);
        }
      }
      __syncwarp();
      copied += tiles;
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  const int group = int(threadIdx.x) / kGroupThreads;
  const uint32_t q_tile = base + uint32_t(group * kQTileBytes);
  const bool warp_leader = (threadIdx.x & 31) == 0;
  int consumed = 0;  // tiles this block has consumed, over its items
  for (int w = int(blockIdx.x); w < items; w += int(gridDim.x)) {
    const FlashItem item(p, w, row_tiles);
    if (!item.has_rows()) continue;
    const int head = item.pair * 2 + group;
    const int tiles = (item.context_end(p) + kKeys - 1) / kKeys;
    // The group's products that read the last item's Q have finished.
    if (consumed > 0) asm volatile("bar.sync %0, %1;\n" ::"r"(1 + group), "n"(kGroupThreads));
    load_queries(p, item.q_begin, item.tile_row0, item.q_count, head, q_tile);
    cp_async_commit();
    FlashRows rows(p, item.q_begin, item.q_count, item.tile_row0);
    cp_async_wait<0>();
    fence_shared_for_wgmma();
    asm volatile("bar.sync %0, %1;\n" ::"r"(1 + group), "n"(kGroupThreads) : "memory");  // Q
    // Turns: group g waits on named barrier 3 + g before it issues, and arrives on the other's
    // once its S has finished; group 1 gives group 0 the block's first turn, and the turns run
    // on across items (a turn passed at an item's end is taken at the next one's start), so
    // neither group arrives twice on a barrier before the other has taken the first arrival.
    if (group == 1 && consumed == 0 && tiles > 0) {
      asm volatile("bar.arrive 3, %0;\n" ::"n"(kConsumerThreads) : "memory");
    }
    for (int j = 0; j < tiles; ++j) {
      const int tile = consumed + j;
      mbarrier_wait(full + 8 * (tile % kStages), (tile / kStages) & 1);
      asm volatile("bar.sync %0, %1;\n" ::"r"(3 + group), "n"(kConsumerThreads));
      float s[kKeys / 2];
      issue_scores(s, q_tile, stage_at(tile));
      if (j > 0) {
        rows.issue_values(stage_at(tile - 1) + kKvTileBytes);
        wgmma_wait<1>();
      } else {
        wgmma_wait<0>();
      }
      // (An arrive between the issue and the wait makes ptxas serialize the products.)
      asm volatile("bar.arrive %0, %1;\n" ::"r"(4 - group), "n"(kConsumerThreads));
      const float2 corr = rows.softmax(j, s);
      wgmma_wait<0>();
      if (j > 0 && warp_leader) mbarrier_arrive(empty + 8 * ((tile - 1) % kStages));
      rows.finish(s, corr);
    }
    if (tiles > 0) {
      const int last = consumed + tiles - 1;
      rows.issue_values(stage_at(last) + kKvTileBytes);
      wgmma_wait<0>();
      if (warp_leader) mbarrier_arrive(empty + 8 * (last % kStages));
    }
    rows.store(p, item.q_begin, head);
    consumed += tiles;
  }
  // Group 1's last turn, passed to group 0, is taken here: no barrier is left mid-phase.
  if (group == 0 && consumed > 0) {
    asm volatile("bar.sync 3, %0;\n" ::"n"(kConsumerThreads) : "memory");
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

// The tensor map of one layer's K or V cache at `cache`: rows of 128 bf16 dims (256 bytes; as
// many rows as an int32 row coordinate reaches, only those the block tables name are read),
// boxes of block_size rows x 64 dims, 128-byte swizzle. Made once per cache pointer and block
// size and kept for the process (host-only work: safe while a graph is captured).
const CUtensorMap& cache_tensor_map(const bf16* cache, int block_size) {
  using Encode = decltype(&cuTensorMapEncodeTiled);
  static const Encode encode = reinterpret_cast<Encode>(
      driver_entry_point("cuTensorMapEncodeTiled", "the Hopper flash kernel"));
  static std::mutex mutex;
  static std::map<std::pair<const bf16*, int>, CUtensorMap> maps;
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, added] = maps.try_emplace({cache, block_size});
  if (added) {
    const cuuint64_t dims[2] = {kHeadDim, cuuint64_t(INT32_MAX)};
    const cuuint64_t strides[1] = {kHeadDim * sizeof(bf16)};
    const cuuint32_t box[2] = {64, cuuint32_t(block_size)};
    const cuuint32_t element_strides[2] = {1, 1};
    const CUresult status = encode(
        &it->second, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16*>(cache), dims, strides,
        box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (status != CUDA_SUCCESS) {
      maps.erase(it);
      const std::string what =
          "cuTensorMapEncodeTiled failed (CUresult " + std::to_string(int(status)) + ")";
      throw_cuda_failure("cache_tensor_map", __FILE__, __LINE__, what.c_str());
    }
  }
  return it->second;
}

}  // namespace

bool hopper_flash_runs(const AttentionParams& p) {
  return p.hopper_flash && p.head_dim == kHeadDim && (p.num_heads / p.num_kv_heads) % 2 == 0 &&
         p.block_size >= 8 && p.block_size <= 64 && hopper_code_runs();
}

namespace {

// The kernel's 64-row tiles per chunk (of the longest chunk) and work items (FlashItem).
int flash_row_tiles(const AttentionParams& p) { return (p.max_queries + kRows - 1) / kRows; }
int flash_items(const AttentionParams& p) {
  return (p.num_seqs - p.first_flash_seq) * (p.num_heads / 2) * flash_row_tiles(p);
}

}  // namespace

int hopper_flash_blocks(const AttentionParams& p) {
  const int items = flash_items(p);
  if (p.flash_sms <= 0 || items <= p.flash_sms) return items;
  const int rounds = (items + p.flash_sms - 1) / p.flash_sms;
  return (items + rounds - 1) / rounds;
}

void launch_flash_hopper(const AttentionParams& p, cudaStream_t stream) {
  static const cudaError_t raised = cudaFuncSetAttribute(
      flash_hopper_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
  GPUFRAC_CUDA_CHECK(raised);
  const CUtensorMap& k_map = cache_tensor_map(p.k_cache, p.block_size);
  const CUtensorMap& v_map = cache_tensor_map(p.v_cache, p.block_size);
  launch_kernel(flash_hopper_kernel, dim3(unsigned(hopper_flash_blocks(p))), dim3(kThreads),
                kSharedBytes, stream, p.overlap, p, k_map, v_map, flash_items(p),
                flash_row_tiles(p));
}

}  // namespace gpufrac::engine
