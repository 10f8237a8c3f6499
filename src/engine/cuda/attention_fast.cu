// The fast attention kernels (AttentionKernels::kFast, attention.h): flash attention on the
// tensor cores for prompt chunks, and a tiled decode kernel that stages K/V in shared memory
// with 16-byte loads. Both read K/V through the block tables and mask by token_context, so they
// compute exactly what the simple kernel computes (up to bf16 rounding of the probabilities that
// the flash kernel feeds to the tensor cores).
#include <algorithm>

#include "engine/cuda/attention_internal.cuh"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device_math.cuh"
#include "engine/cuda/kernel_launch.cuh"
#include "engine/cuda/rope.cuh"

namespace gpufrac::engine {

namespace {

constexpr int kThreads = 128;   // 4 warps
constexpr int kTileKeys = 64;   // K/V positions per shared-memory tile
constexpr int kFlashRows = 64;  // query rows per flash block: 16 per warp
// Flash blocks per SM the register budget is capped for: 3 (168 registers) on sm_90, where
// ptxas fits the kernel without spilling; sm_80's code spills there, so it keeps 2.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
constexpr int kFlashBlocksPerSm = 2;
#else
constexpr int kFlashBlocksPerSm = 3;
#endif

template <int kHeadDim>
__host__ __device__ constexpr int tile_stride() {
  return kHeadDim + 8;  // 16-byte pad: conflict-free fragment reads
}
// Dynamic shared memory of both kernels: two stages of K and V tiles (tile i + 1 loads while
// tile i is computed).
template <int kHeadDim>
__host__ __device__ constexpr int two_stage_shared_bytes() {
  return 2 * 2 * kTileKeys * tile_stride<kHeadDim>() * int(sizeof(bf16));
}

// Dynamic shared memory of the decode kernel with kStages K/V stages (two fit three blocks per
// SM, three two: decode_blocks_per_sm).
template <int kHeadDim, int kStages>
__host__ __device__ constexpr int decode_shared_bytes() {
  static_assert(kStages == 2 || kStages == 3, "the two decode kernels");
  return two_stage_shared_bytes<kHeadDim>() / 2 * kStages;
}

// Loads positions [t0, t0 + kTileKeys) of one KV head into shared tiles (row stride kStride
// elements) with 16-byte cp.async copies (no staging in registers); positions at or past `end`
// are zero-filled and their table entries never read. p.block_size is a power of two
// (fast_attention_supported), so a position's block and offset are a shift and a mask. The
// caller commits, waits (cp_async_wait) and syncs the block.
template <int kHeadDim, int kStride>
__device__ __forceinline__ void load_kv_tile_async(const AttentionParams& p, const int32_t* table,
                                                   int kv_head, int t0, int end, bf16* ks,
                                                   bf16* vs) {
  constexpr int kChunksPerRow = kHeadDim / 8;
  constexpr int kKeysPerPass = kThreads / kChunksPerRow;
  static_assert(kThreads % kChunksPerRow == 0 && kTileKeys % kKeysPerPass == 0,
                "whole chunks per thread");
  const int part = threadIdx.x % kChunksPerRow, first_key = threadIdx.x / kChunksPerRow;
  const int block_shift = __ffs(p.block_size) - 1;
  const int block_elements = p.num_kv_heads * p.block_size * kHeadDim;
  const bf16* k_head = p.k_cache + (kv_head * p.block_size * kHeadDim + part * 8);
  const bf16* v_head = p.v_cache + (kv_head * p.block_size * kHeadDim + part * 8);
#pragma unroll
  for (int i = 0; i < kTileKeys / kKeysPerPass; ++i) {
    const int key = first_key + i * kKeysPerPass;
    const int t = t0 + key;
    bf16* k_dst = ks + key * kStride + part * 8;
    bf16* v_dst = vs + key * kStride + part * 8;
    if (t < end) {
      const int64_t at =
          int64_t(table[t >> block_shift]) * block_elements + (t & (p.block_size - 1)) * kHeadDim;
      cp_async_16(static_cast<uint32_t>(__cvta_generic_to_shared(k_dst)), k_head + at);
      cp_async_16(static_cast<uint32_t>(__cvta_generic_to_shared(v_dst)), v_head + at);
    } else {
      *reinterpret_cast<uint4*>(k_dst) = make_uint4(0, 0, 0, 0);
      *reinterpret_cast<uint4*>(v_dst) = make_uint4(0, 0, 0, 0);
    }
  }
}

// The kStages-stage cp.async pipeline over the K/V tiles [begin, end) of one sequence's KV head.
// Stage s of `tiles` holds a K tile and then a V tile (2 * kTileKeys * kStride elements).
// kv_pipeline_start starts the copies of the first kStages - 1 tiles into stages 0, 1, ...;
// kv_pipeline_next, called before the tile at `t0` (in `stage`) is computed, starts the copy of
// the tile kStages - 1 after it into the stage computed last, waits for tile t0, and syncs the
// block. Tiles i + 1 .. i + kStages - 1 are in flight while tile i computes. With more than two
// stages every call commits one copy group (empty past `end`), so waiting for all but the last
// kStages - 1 groups is waiting for tile t0.
template <int kHeadDim, int kStride, int kStages = 2>
__device__ __forceinline__ void kv_pipeline_start(const AttentionParams& p, const int32_t* table,
                                                  int kv_head, int begin, int end, bf16* tiles) {
  if (begin >= end) return;
  constexpr int kTileElements = kTileKeys * kStride;
  load_kv_tile_async<kHeadDim, kStride>(p, table, kv_head, begin, end, tiles,
                                        tiles + kTileElements);
  cp_async_commit();
#pragma unroll
  for (int s = 1; s + 1 < kStages; ++s) {
    const int t = begin + s * kTileKeys;
    if (t < end) {
      bf16* dst = tiles + s * 2 * kTileElements;
      load_kv_tile_async<kHeadDim, kStride>(p, table, kv_head, t, end, dst, dst + kTileElements);
    }
    cp_async_commit();
  }
}

template <int kHeadDim, int kStride, int kStages = 2>
__device__ __forceinline__ void kv_pipeline_next(const AttentionParams& p, const int32_t* table,
                                                 int kv_head, int t0, int end, bf16* tiles,
                                                 int stage) {
  constexpr int kTileElements = kTileKeys * kStride;
  if constexpr (kStages == 2) {  // no empty groups: in this form the flash kernel (two stages)
    if (t0 + kTileKeys < end) {  // fits its registers without spilling
      bf16* next = tiles + (stage ^ 1) * 2 * kTileElements;
      load_kv_tile_async<kHeadDim, kStride>(p, table, kv_head, t0 + kTileKeys, end, next,
                                            next + kTileElements);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
  } else {
    const int t = t0 + (kStages - 1) * kTileKeys;
    if (t < end) {
      bf16* next = tiles + ((stage + kStages - 1) % kStages) * 2 * kTileElements;
      load_kv_tile_async<kHeadDim, kStride>(p, table, kv_head, t, end, next, next + kTileElements);
    }
    cp_async_commit();
    cp_async_wait<kStages - 1>();
  }
  __syncthreads();
}

// ---- Flash attention for prompt chunks --------------------------------------------------------

// d += a (16x16 bf16, row-major fragment) * b (16x8 bf16, column fragment), fp32 accumulators.
__device__ __forceinline__ void mma_bf16_16816(float d[4], const uint32_t a[4], uint32_t b0,
                                               uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8x8 bf16 matrices from shared memory (B fragments of K^T from a row-major [key][dim]
// tile: b0, b1 of two k-steps): lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const bf16* row_address) {
  unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row_address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// Two 8x8 bf16 matrices from shared memory: lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x2(uint32_t r[2], const bf16* row_address) {
  unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row_address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(address));
}

// Four 8x8 bf16 matrices from shared memory, transposed (B fragments of a row-major [k][n]
// tile): lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const bf16* row_address) {
  unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row_address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// Flash blocks per SM at kHeads query heads per warp (the register budget of the launch
// bounds): one head fits 168 registers, three blocks on sm_90 (sm_80's code spills there: 2);
// two heads hold twice the accumulators, 255 registers, two blocks.
template <int kHeads>
__host__ __device__ constexpr int flash_blocks_per_sm() {
  return kHeads == 1 ? kFlashBlocksPerSm : 2;
}
// Dynamic shared memory of the flash kernel: the K/V stages, and with two heads per warp the
// block's Q tile of each head (one head keeps its Q fragments in registers).
template <int kHeadDim, int kHeads>
__host__ __device__ constexpr int flash_shared_bytes() {
  return two_stage_shared_bytes<kHeadDim>() +
         (kHeads == 1 ? 0 : kHeads * kFlashRows * tile_stride<kHeadDim>() * int(sizeof(bf16)));
}

// One block per (sequence, 64-row query tile, kHeads query heads of one KV head); warp w owns
// rows 16w..16w+15 of the tile for each of the block's heads, so every K/V fragment it loads
// feeds kHeads MMAs. Fragment layout (PTX mma m16n8k16): lane = 4 g + t4; a thread holds rows g
// and g + 8, columns 2 t4, 2 t4 + 1 (+ 8) of each fragment.
template <int kHeadDim, int kHeads>
__global__ void __launch_bounds__(kThreads, flash_blocks_per_sm<kHeads>())
    flash_prefill_kernel(AttentionParams p) {
  wait_for_previous_grid();
  allow_next_grid_launch();
  constexpr int kStride = tile_stride<kHeadDim>();
  constexpr int kTileElements = kTileKeys * kStride;
  constexpr int kSteps = kHeadDim / 16;  // k-steps of Q K^T
  constexpr int kDimTiles = kHeadDim / 8;
  constexpr int kKeyTiles = kTileKeys / 8;
  // [stage][K, V][kTileKeys][kStride], then (kHeads > 1) [kHeads][kFlashRows][kStride] of Q
  extern __shared__ __align__(16) bf16 tiles[];

  const int seq = p.first_flash_seq + int(blockIdx.x);
  const int q_begin = p.seq_query_start[seq];
  const int q_count = p.seq_query_start[seq + 1] - q_begin;
  // The last query tiles (the longest causal ranges) are launched first.
  const int tile_row0 = (gridDim.z - 1 - blockIdx.z) * kFlashRows;
  if (q_count < kFlashMinQueries || tile_row0 >= q_count) return;  // uniform over the block
  const int first_head = blockIdx.y * kHeads;
  const int kv_head = first_head / (p.num_heads / p.num_kv_heads);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t4 = lane & 3;

  const int kv_end = flash_tile_context_end(p, q_begin, tile_row0, kFlashRows, q_count);

  const int r_lo = tile_row0 + warp * 16 + g, r_hi = r_lo + 8;  // rows within the sequence
  const bool lo_ok = r_lo < q_count, hi_ok = r_hi < q_count;
  const int ctx_lo = lo_ok ? p.token_context[q_begin + r_lo] : 0;
  const int ctx_hi = hi_ok ? p.token_context[q_begin + r_hi] : 0;

  // Q: one head's fragments stay in registers; with more heads the tile is copied to shared
  // memory (rows past the sequence zero) in the first tile's copy group and read per k-step.
  uint32_t qf[kHeads == 1 ? kSteps : 1][4];
  bf16* q_tiles = tiles + 4 * kTileElements;
  if constexpr (kHeads == 1) {
    const bf16* q_lo = p.q + (int64_t(q_begin + r_lo) * p.num_heads + first_head) * kHeadDim;
    const bf16* q_hi = p.q + (int64_t(q_begin + r_hi) * p.num_heads + first_head) * kHeadDim;
#pragma unroll
    for (int st = 0; st < kSteps; ++st) {
      const int col = st * 16 + 2 * t4;
      qf[st][0] = lo_ok ? load_u32(q_lo + col) : 0u;
      qf[st][1] = hi_ok ? load_u32(q_hi + col) : 0u;
      qf[st][2] = lo_ok ? load_u32(q_lo + col + 8) : 0u;
      qf[st][3] = hi_ok ? load_u32(q_hi + col + 8) : 0u;
    }
  } else {
    constexpr int kChunksPerRow = kHeadDim / 8;
    constexpr int kChunks = kHeads * kFlashRows * kChunksPerRow;
    static_assert(kChunks % kThreads == 0, "whole chunks per thread");
#pragma unroll
    for (int i = 0; i < kChunks / kThreads; ++i) {
      const int c = threadIdx.x + i * kThreads;
      const int part = c % kChunksPerRow, row = (c / kChunksPerRow) % kFlashRows;
      const int h = c / (kChunksPerRow * kFlashRows);
      bf16* dst = q_tiles + (h * kFlashRows + row) * kStride + part * 8;
      if (tile_row0 + row < q_count) {
        const bf16* src =
            p.q + (int64_t(q_begin + tile_row0 + row) * p.num_heads + first_head + h) * kHeadDim +
            part * 8;
        cp_async_16(static_cast<uint32_t>(__cvta_generic_to_shared(dst)), src);
      } else {
        *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
      }
    }
    cp_async_commit();  // waited for with the first K/V tile
  }
  // Lane l's row address of the A fragments (ldmatrix_x4: rows 0..15, columns 0 / 8).
  const bf16* q_rows = q_tiles + (warp * 16 + (lane & 15)) * kStride + (lane >> 4) * 8;

  float o[kHeads][kDimTiles][4];
  float m_lo[kHeads], m_hi[kHeads], l_lo[kHeads], l_hi[kHeads];
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) o[h][n][0] = o[h][n][1] = o[h][n][2] = o[h][n][3] = 0.0f;
    m_lo[h] = m_hi[h] = -INFINITY;
    l_lo[h] = l_hi[h] = 0.0f;
  }
  const float scale = p.scale * kLog2e;  // scores in the log2 domain
  const int32_t* table = p.block_tables + int64_t(seq) * p.header->table_width;

  kv_pipeline_start<kHeadDim, kStride>(p, table, kv_head, 0, kv_end, tiles);
  for (int kv0 = 0, stage = 0; kv0 < kv_end; kv0 += kTileKeys, stage ^= 1) {
    const bf16* ks = tiles + stage * 2 * kTileElements;
    const bf16* vs = ks + kTileElements;
    kv_pipeline_next<kHeadDim, kStride>(p, table, kv_head, kv0, kv_end, tiles, stage);

    float s[kHeads][kKeyTiles][4];
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
#pragma unroll
      for (int n = 0; n < kKeyTiles; ++n) s[h][n][0] = s[h][n][1] = s[h][n][2] = s[h][n][3] = 0.0f;
    }
    // Matrix i of ldmatrix_x2 (lanes 8i..8i+7 give its rows): keys n*8 + 0..7, dims
    // st*16 + 8i..+7: b0 and b1 of k-step st.
    const bf16* k_rows = ks + (lane & 7) * kStride + ((lane >> 3) & 1) * 8;
#pragma unroll
    for (int st = 0; st < kSteps; ++st) {
      uint32_t a[kHeads][4];
#pragma unroll
      for (int h = 0; h < kHeads; ++h) {
        if constexpr (kHeads == 1) {
          a[h][0] = qf[st][0], a[h][1] = qf[st][1], a[h][2] = qf[st][2], a[h][3] = qf[st][3];
        } else {
          ldmatrix_x4(a[h], q_rows + h * kFlashRows * kStride + st * 16);
        }
      }
#pragma unroll
      for (int n = 0; n < kKeyTiles; ++n) {
        uint32_t b[2];
        ldmatrix_x2(b, k_rows + n * 8 * kStride + st * 16);
#pragma unroll
        for (int h = 0; h < kHeads; ++h) mma_bf16_16816(s[h][n], a[h], b[0], b[1]);
      }
    }
    // Scores stay unscaled until the exponent (scale > 0 keeps the maximum); a tile that every
    // row of the warp sees whole is not masked. Every head of the block has the same rows.
    const bool whole_tile = __all_sync(0xffffffffu, kv0 + kTileKeys <= min(ctx_lo, ctx_hi));
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
      const float2 corr = flash_softmax_rows<kKeyTiles>(
          [&](int n, int i) -> float& { return s[h][n][i]; }, kv0, t4, ctx_lo, ctx_hi, whole_tile,
          scale, m_lo[h], m_hi[h], l_lo[h], l_hi[h]);
#pragma unroll
      for (int n = 0; n < kDimTiles; ++n) {
        o[h][n][0] *= corr.x;
        o[h][n][1] *= corr.x;
        o[h][n][2] *= corr.y;
        o[h][n][3] *= corr.y;
      }
    }

    // O += P V, each V fragment feeding every head.
    const int mi = lane >> 3, mr = lane & 7;
#pragma unroll
    for (int kk = 0; kk < kTileKeys / 16; ++kk) {
      // P's accumulator fragments are the A fragments of k-step kk (keys 16kk..16kk+15).
      uint32_t pa[kHeads][4];
#pragma unroll
      for (int h = 0; h < kHeads; ++h) {
        pa[h][0] = pack_bf16x2(s[h][2 * kk][0], s[h][2 * kk][1]);
        pa[h][1] = pack_bf16x2(s[h][2 * kk][2], s[h][2 * kk][3]);
        pa[h][2] = pack_bf16x2(s[h][2 * kk + 1][0], s[h][2 * kk + 1][1]);
        pa[h][3] = pack_bf16x2(s[h][2 * kk + 1][2], s[h][2 * kk + 1][3]);
      }
      const bf16* v_rows = vs + (kk * 16 + (mi & 1) * 8 + mr) * kStride + (mi >> 1) * 8;
#pragma unroll
      for (int dt = 0; dt < kHeadDim / 16; ++dt) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, v_rows + dt * 16);
#pragma unroll
        for (int h = 0; h < kHeads; ++h) {
          mma_bf16_16816(o[h][2 * dt], pa[h], b[0], b[1]);
          mma_bf16_16816(o[h][2 * dt + 1], pa[h], b[2], b[3]);
        }
      }
    }
    __syncthreads();  // this stage is refilled next
  }
  cp_async_wait<0>();  // no copy outlives the block (kv_end 0 leaves Q's in flight)

#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    const int head = first_head + h;
    bf16* out_lo = p.out + (int64_t(q_begin + r_lo) * p.num_heads + head) * kHeadDim + 2 * t4;
    bf16* out_hi = p.out + (int64_t(q_begin + r_hi) * p.num_heads + head) * kHeadDim + 2 * t4;
    flash_store_rows<kDimTiles>([&](int n, int i) { return o[h][n][i]; }, l_lo[h], l_hi[h], out_lo,
                                out_hi, lo_ok, hi_ok);
  }
}

// ---- Tiled decode attention ------------------------------------------------------------------

// One block per (row, KV head, split): all query heads of the KV head (up to kMaxGroup, the rows
// g < group of one m16n8k16 tile; rows 8..15 are zero padding). Per 64-key tile staged in shared
// memory with 16-byte loads, warp w takes keys 16w..16w+15 on the tensor cores: S = Q K^T (two
// n-tiles), an online softmax of its own (running max and sum per head), O += P V (one k-step,
// ldmatrix.trans for V). The four warps' (max, sum, O) are merged through shared memory at the
// end, then written as the output (splits == 1) or as the split's partial and log-sum-exp.
// kStages K/V stages in shared memory (kv_pipeline_next); with p.rope the last one holds the
// block's q rows until the loop first refills it.
//
// When the blocks wait for the previous kernel (DecodeStart) bends kernel_launch.cuh's contract
// on purpose in two cases:
// - kBesideFlash: launched right after the flash kernel of the same step, the blocks start
//   without waiting for it, so decode rows stream their K/V while the prompt chunks compute.
//   What they read before waiting (q, K/V) was written by launch_qkv_rope_kv, which had
//   completed before any flash block passed its wait, and no block of this grid starts before
//   every flash block has; the flash kernel writes only its own output rows, which nothing here
//   reads. This grid still completes after the flash kernel (leave_beside_flash), so the kernels
//   after attention see both.
// - kCacheFirst (with p.rope: a decode-only step, one row per sequence): a block whose range
//   does not hold its row's own position starts its K/V copies before waiting for the qkv
//   projection. Those positions were written by earlier steps, and the step's inputs (tables,
//   contexts) before it; all of that completed before the projection passed its own wait, and
//   this grid launches only after that. The row's own position is read only by the block that
//   writes it, after the wait.
enum class DecodeStart { kAfterPrevious, kCacheFirst, kBesideFlash };

// The exit of a decode block launched beside the flash kernel: the grid must complete after the
// flash kernel. Without p.beside_flash_exits every block waits for it; with it the block whose
// count is the grid's last waits (and sets the counter back to 0 for the next launch): the grid
// completes only once every block has exited, that one after the flash kernel.
__device__ __forceinline__ void leave_beside_flash(const AttentionParams& p) {
  if (p.beside_flash_exits == nullptr) {
    wait_for_previous_grid();
    return;
  }
  if (threadIdx.x != 0) return;
  const int blocks = int(gridDim.x * gridDim.y * gridDim.z);
  if (atomicAdd(p.beside_flash_exits, 1) == blocks - 1) {
    atomicExch(p.beside_flash_exits, 0);
    wait_for_previous_grid();
  }
}

template <int kHeadDim, int kStages>
__global__ void __launch_bounds__(kThreads, decode_blocks_per_sm(kStages))
    decode_attention_kernel(AttentionParams p, DecodeStart start) {
  const bool beside_flash = start == DecodeStart::kBesideFlash;
  if (start == DecodeStart::kAfterPrevious) wait_for_previous_grid();
  allow_next_grid_launch();
  constexpr int kStride = tile_stride<kHeadDim>();
  constexpr int kTileElements = kTileKeys * kStride;
  constexpr int kSteps = kHeadDim / 16;
  constexpr int kDimTiles = kHeadDim / 8;
  constexpr int kWarps = kThreads / 32;
  static_assert(kTileKeys == 16 * kWarps, "16 keys of each tile per warp");
  static_assert(kWarps * kMaxGroup * kHeadDim * 4 <= two_stage_shared_bytes<kHeadDim>(),
                "the warps' outputs fit in the tiles");
  extern __shared__ __align__(16) bf16 tiles[];  // [stage][K, V][kTileKeys][kStride]
  __shared__ float w_max[kWarps][kMaxGroup], w_sum[kWarps][kMaxGroup];
  __shared__ float angle_cos[kHeadDim / 2], angle_sin[kHeadDim / 2];  // with p.rope

  const int row = blockIdx.x, kv_head = blockIdx.y, split = blockIdx.z;
  const int seq = p.token_seq[row];
  if (p.max_queries >= kFlashMinQueries && row_is_flash(p, seq, kFlashMinQueries)) {
    if (beside_flash) leave_beside_flash(p);
    return;
  }
  const int group = p.num_heads / p.num_kv_heads;
  const int first_head = kv_head * group;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t4 = lane & 3;

  const int context = p.token_context[row];
  const int per_split = (context + p.splits - 1) / p.splits;
  const int chunk = (per_split + kTileKeys - 1) / kTileKeys * kTileKeys;
  const int begin = split * chunk;
  const int end = min(context, begin + chunk);

  const int32_t* table = p.block_tables + int64_t(seq) * p.header->table_width;
  // With p.rope: this kernel runs q/k norm + RoPE (rope.cuh) into the last stage's K tile (free
  // until the loop's first refill), and the block whose range holds the row's own position
  // writes that position's K/V first (then fences, so its copies read them).
  const bool applies_rope = p.rope.qkv.data != nullptr;
  const bool writes_kv = applies_rope && begin <= context - 1 && context - 1 < end;
  bf16* q_stage = tiles + (kStages - 1) * 2 * kTileElements;
  if (!writes_kv) {
    kv_pipeline_start<kHeadDim, kStride, kStages>(p, table, kv_head, begin, end, tiles);
  }
  if (start == DecodeStart::kCacheFirst) wait_for_previous_grid();
  if (applies_rope) {
    rope_angles<kHeadDim>(p.rope, row, angle_cos, angle_sin);
    __syncthreads();
    const int jobs = group + (writes_kv ? 2 : 0);
    for (int job = warp; job < jobs; job += kWarps) {
      const QkvPart part = job < group ? QkvPart::q : job == group ? QkvPart::k : QkvPart::v;
      float v[kHeadDim / 32];
      rope_head<kHeadDim / 32>(p.rope, row, part, part == QkvPart::q ? first_head + job : kv_head,
                               angle_cos, angle_sin, v);
      bf16* dst = part == QkvPart::q ? q_stage + job * kHeadDim
                                     : kv_slot<kHeadDim>(p.rope, row, part, kv_head);
      if (dst) store_head<kHeadDim / 32>(dst, v);
    }
    if (writes_kv) __threadfence();  // the copies (cp.async.cg) read the cache from L2
    __syncthreads();
    if (writes_kv) {
      kv_pipeline_start<kHeadDim, kStride, kStages>(p, table, kv_head, begin, end, tiles);
    }
  }
  const bool head_ok = g < group;
  const int head = first_head + (head_ok ? g : 0);
  const bf16* q_row = applies_rope ? q_stage + (head - first_head) * kHeadDim
                                   : p.q + (int64_t(row) * p.num_heads + head) * kHeadDim;
  uint32_t qf[kSteps][2];
#pragma unroll
  for (int st = 0; st < kSteps; ++st) {
    qf[st][0] = head_ok ? load_u32(q_row + st * 16 + 2 * t4) : 0u;
    qf[st][1] = head_ok ? load_u32(q_row + st * 16 + 2 * t4 + 8) : 0u;
  }
  if (applies_rope) __syncthreads();  // q_stage is read before the loop refills that stage
  float o[kDimTiles][4];
#pragma unroll
  for (int n = 0; n < kDimTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m_run = -INFINITY, l_run = 0.0f;
  const float scale = p.scale * kLog2e;  // scores in the log2 domain
  const int mi = lane >> 3, mr = lane & 7;

  // Tiles i + 1 .. i + kStages - 1 are in flight while tile i is computed (started above).
  for (int t0 = begin, stage = 0; t0 < end;
       t0 += kTileKeys, stage = stage + 1 == kStages ? 0 : stage + 1) {
    const bf16* ks = tiles + stage * 2 * kTileElements;
    const bf16* vs = ks + kTileElements;
    kv_pipeline_next<kHeadDim, kStride, kStages>(p, table, kv_head, t0, end, tiles, stage);

    float s[2][4];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
      // Matrix i of ldmatrix_x4: keys warp*16 + n*8 + 0..7, dims st*16 + 8i..+7 (kSteps even).
      const bf16* k_rows = ks + (warp * 16 + n * 8 + (lane & 7)) * kStride + (lane >> 3) * 8;
#pragma unroll
      for (int st = 0; st < kSteps; st += 2) {
        uint32_t b[4];
        ldmatrix_x4(b, k_rows + st * 16);
        const uint32_t a0[4] = {qf[st][0], 0u, qf[st][1], 0u};
        const uint32_t a1[4] = {qf[st + 1][0], 0u, qf[st + 1][1], 0u};
        mma_bf16_16816(s[n], a0, b[0], b[1]);
        mma_bf16_16816(s[n], a1, b[2], b[3]);
      }
    }
    float tile_max = -INFINITY;
#pragma unroll
    for (int n = 0; n < 2; ++n) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int key = t0 + warp * 16 + n * 8 + 2 * t4 + j;
        s[n][j] = key < end ? s[n][j] * scale : -INFINITY;
        tile_max = fmaxf(tile_max, s[n][j]);
      }
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float new_max = fmaxf(m_run, tile_max);
    const float base = new_max == -INFINITY ? 0.0f : new_max;  // all masked so far: p = 0
    const float corr = exp2f(m_run - base);
    m_run = new_max;
    float sum = 0.0f;
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      s[n][0] = exp2f(s[n][0] - base);
      s[n][1] = exp2f(s[n][1] - base);
      sum += s[n][0] + s[n][1];
    }
    l_run = l_run * corr + sum;  // this thread's keys; the quad is summed at the end
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) {
      o[n][0] *= corr;
      o[n][1] *= corr;
    }
    const uint32_t a[4] = {pack_bf16x2(s[0][0], s[0][1]), 0u, pack_bf16x2(s[1][0], s[1][1]), 0u};
    const bf16* v_rows = vs + (warp * 16 + (mi & 1) * 8 + mr) * kStride + (mi >> 1) * 8;
#pragma unroll
    for (int dt = 0; dt < kHeadDim / 16; ++dt) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, v_rows + dt * 16);
      mma_bf16_16816(o[2 * dt], a, b[0], b[1]);
      mma_bf16_16816(o[2 * dt + 1], a, b[2], b[3]);
    }
    __syncthreads();  // this stage is refilled next
  }

  l_run += __shfl_xor_sync(0xffffffffu, l_run, 1);
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 2);
  float* w_out = reinterpret_cast<float*>(tiles);  // [kWarps][kMaxGroup][kHeadDim]; tiles done
  if (head_ok) {
    float* dst = w_out + (warp * kMaxGroup + g) * kHeadDim + 2 * t4;
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) {
      dst[n * 8] = o[n][0];
      dst[n * 8 + 1] = o[n][1];
    }
    if (t4 == 0) {
      w_max[warp][g] = m_run;
      w_sum[warp][g] = l_run;
    }
  }
  __syncthreads();

  for (int idx = tid; idx < group * kHeadDim; idx += kThreads) {
    const int h = idx / kHeadDim, d = idx % kHeadDim;
    float top = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) top = fmaxf(top, w_max[w][h]);
    float total = 0.0f, acc = 0.0f;
    if (top != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float weight = exp2f(w_max[w][h] - top);
        total += w_sum[w][h] * weight;
        acc += w_out[(w * kMaxGroup + h) * kHeadDim + d] * weight;
      }
    }
    const float result = total > 0 ? acc / total : 0.0f;
    const int64_t head_row = int64_t(row) * p.num_heads + first_head + h;
    if (p.splits == 1) {
      p.out[head_row * kHeadDim + d] = __float2bfloat16_rn(result);
    } else {
      p.partial_out[(head_row * p.splits + split) * kHeadDim + d] = result;
      if (d == 0) {
        p.partial_lse[head_row * p.splits + split] = total > 0 ? top + log2f(total) : -INFINITY;
      }
    }
  }
  if (beside_flash) leave_beside_flash(p);
}

template <int kHeadDim, int kHeads>
void launch_flash(const AttentionParams& p, cudaStream_t stream) {
  constexpr int kShared = flash_shared_bytes<kHeadDim, kHeads>();
  static const cudaError_t raised = cudaFuncSetAttribute(
      flash_prefill_kernel<kHeadDim, kHeads>, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared);
  GPUFRAC_CUDA_CHECK(raised);
  // Sequences before first_flash_seq are decodes: no block of the grid is spent on them.
  dim3 grid(p.num_seqs - p.first_flash_seq, p.num_heads / kHeads,
            (p.max_queries + kFlashRows - 1) / kFlashRows);
  launch_kernel(flash_prefill_kernel<kHeadDim, kHeads>, grid, dim3(kThreads), kShared, stream,
                p.overlap, p);
}

template <int kHeadDim, int kStages>
void launch_decode(const AttentionParams& p, int decode_rows, bool beside_flash,
                   cudaStream_t stream) {
  const DecodeStart start = beside_flash                 ? DecodeStart::kBesideFlash
                            : p.rope.qkv.data != nullptr ? DecodeStart::kCacheFirst
                                                         : DecodeStart::kAfterPrevious;
  constexpr int kShared = decode_shared_bytes<kHeadDim, kStages>();
  static const cudaError_t raised =
      cudaFuncSetAttribute(decode_attention_kernel<kHeadDim, kStages>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, kShared);
  GPUFRAC_CUDA_CHECK(raised);
  launch_kernel(decode_attention_kernel<kHeadDim, kStages>,
                dim3(decode_rows, p.num_kv_heads, p.splits), dim3(kThreads), kShared, stream,
                p.overlap, p, start);
}

template <int kHeadDim>
void launch_for_head_dim(const AttentionParams& p, cudaStream_t stream) {
  const bool flash = p.max_queries >= kFlashMinQueries;
  const int decode_rows = p.decode_rows >= 0 ? p.decode_rows : p.rows;
  if (flash && hopper_flash_runs(p)) {
    launch_flash_hopper(p, stream);
  } else if (flash) {
    // Two heads per warp where the heads of a KV head pair up, unless the pairs' blocks would
    // leave SMs idle that blocks of one head fill (a served step's one short prompt chunk).
    const int prompt_rows = p.rows - (p.decode_rows >= 0 ? p.decode_rows : 0);
    const int prompt_tiles = (prompt_rows + kFlashRows - 1) / kFlashRows;
    const bool pairs_fill = p.sm_count <= 0 || int64_t(prompt_tiles) * (p.num_heads / 2) >=
                                                   int64_t(flash_blocks_per_sm<2>()) * p.sm_count;
    if ((p.num_heads / p.num_kv_heads) % 2 == 0 && pairs_fill) {
      launch_flash<kHeadDim, 2>(p, stream);
    } else {
      launch_flash<kHeadDim, 1>(p, stream);
    }
  }
  if (p.min_queries >= kFlashMinQueries) return;  // no decode rows: every sequence is flash's
  if (decode_rows == 0) return;
  // Whole contexts streamed by a grid that fills the SMs: three tiles in flight. Split grids,
  // small ones and the blocks beside the flash kernel keep two, which leaves room for more
  // blocks per SM (at batch 1 three stages made the step 20% slower).
  if (decode_kernel_stages(p) == 3) {
    launch_decode<kHeadDim, 3>(p, decode_rows, flash, stream);
  } else {
    launch_decode<kHeadDim, 2>(p, decode_rows, flash, stream);
  }
  if (p.splits > 1) launch_combine_splits(p, flash ? kFlashMinQueries : 0, stream);
}

}  // namespace

bool fast_attention_supported(int num_heads, int num_kv_heads, int head_dim, int block_size) {
  return (head_dim == 64 || head_dim == 128) && num_kv_heads > 0 && num_heads % num_kv_heads == 0 &&
         num_heads / num_kv_heads <= kMaxGroup && block_size > 0 &&
         (block_size & (block_size - 1)) == 0;
}

int flash_sms_beside_decodes(const AttentionParams& p) {
  const int decode_rows = p.decode_rows >= 0 ? p.decode_rows : p.rows;
  if (p.flash_sms <= 0 || p.max_queries < kFlashMinQueries || decode_rows == 0 ||
      p.min_queries >= kFlashMinQueries ||
      !runs_fast_attention(p.kernels, p.num_heads, p.num_kv_heads, p.head_dim, p.block_size) ||
      !hopper_flash_runs(p)) {
    return 0;
  }
  return hopper_flash_blocks(p);
}

void launch_fast_attention(const AttentionParams& p, cudaStream_t stream) {
  if (p.max_queries >= kFlashMinQueries && (p.seq_query_start == nullptr || p.num_seqs <= 0)) {
    throw_cuda_failure("launch_fast_attention", __FILE__, __LINE__,
                       "a step with prompt chunks needs seq_query_start and num_seqs");
  }
  if (p.head_dim == 64) {
    launch_for_head_dim<64>(p, stream);
  } else {
    launch_for_head_dim<128>(p, stream);
  }
}

}  // namespace gpufrac::engine
