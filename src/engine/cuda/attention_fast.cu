// The fast attention kernels (AttentionKernels::kFast, attention.h): flash attention on the
// tensor cores for prompt chunks, and a tiled decode kernel that stages K/V in shared memory
// with 16-byte loads. Both read K/V through the block tables and mask by token_context, so they
// compute exactly what the simple kernel computes (up to bf16 rounding of the probabilities that
// the flash kernel feeds to the tensor cores).
#include <algorithm>

#include "engine/cuda/attention_internal.cuh"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device_math.cuh"

namespace gpufrac::engine {

namespace {

constexpr int kThreads = 128;  // 4 warps
constexpr int kTileKeys = 64;  // K/V positions per shared-memory tile
constexpr int kFlashRows = 64; // query rows per flash block: 16 per warp

// Loads positions [t0, t0 + kTileKeys) of one KV head into shared tiles (row stride kStride
// elements); positions at or past `end` are zero-filled and their table entries never read.
template <int kHeadDim, int kStride>
__device__ __forceinline__ void load_kv_tile(const AttentionParams& p, const int32_t* table,
                                             int kv_head, int t0, int end, bf16* ks, bf16* vs) {
  constexpr int kChunksPerRow = kHeadDim / 8;  // 16-byte chunks
  constexpr int kChunks = kTileKeys * kChunksPerRow;
  static_assert(kChunks % kThreads == 0, "whole chunks per thread");
  uint4 k_chunk[kChunks / kThreads], v_chunk[kChunks / kThreads];
#pragma unroll
  for (int i = 0; i < kChunks / kThreads; ++i) {
    int c = threadIdx.x + i * kThreads;
    int key = c / kChunksPerRow, part = c % kChunksPerRow;
    int t = t0 + key;
    k_chunk[i] = make_uint4(0, 0, 0, 0);
    v_chunk[i] = make_uint4(0, 0, 0, 0);
    if (t < end) {
      int64_t block = table[t / p.block_size];
      int64_t at = ((block * p.num_kv_heads + kv_head) * p.block_size + t % p.block_size) *
                       kHeadDim + part * 8;
      k_chunk[i] = __ldg(reinterpret_cast<const uint4*>(p.k_cache + at));
      v_chunk[i] = __ldg(reinterpret_cast<const uint4*>(p.v_cache + at));
    }
  }
#pragma unroll
  for (int i = 0; i < kChunks / kThreads; ++i) {
    int c = threadIdx.x + i * kThreads;
    int key = c / kChunksPerRow, part = c % kChunksPerRow;
    *reinterpret_cast<uint4*>(ks + key * kStride + part * 8) = k_chunk[i];
    *reinterpret_cast<uint4*>(vs + key * kStride + part * 8) = v_chunk[i];
  }
}

// ---- Flash attention for prompt chunks --------------------------------------------------------

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ uint32_t load_u32(const bf16* src) {
  return *reinterpret_cast<const uint32_t*>(src);
}

// d += a (16x16 bf16, row-major fragment) * b (16x8 bf16, column fragment), fp32 accumulators.
__device__ __forceinline__ void mma_bf16_16816(float d[4], const uint32_t a[4], uint32_t b0,
                                               uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8x8 bf16 matrices from shared memory, transposed (B fragments of a row-major [k][n]
// tile): lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const bf16* row_address) {
  unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row_address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// One block per (sequence, 64-row query tile, query head); warp w owns rows 16w..16w+15 of the
// tile. Fragment layout (PTX mma m16n8k16): lane = 4 g + t4; a thread holds rows g and g + 8,
// columns 2 t4, 2 t4 + 1 (+ 8) of each fragment.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads) flash_prefill_kernel(AttentionParams p) {
  constexpr int kStride = kHeadDim + 8;  // 16-byte pad: conflict-free fragment reads
  constexpr int kSteps = kHeadDim / 16;  // k-steps of Q K^T
  constexpr int kDimTiles = kHeadDim / 8;
  constexpr int kKeyTiles = kTileKeys / 8;
  __shared__ __align__(16) bf16 ks[kTileKeys * kStride];
  __shared__ __align__(16) bf16 vs[kTileKeys * kStride];
  __shared__ int s_kv_end;

  const int seq = blockIdx.x;
  const int q_begin = p.seq_query_start[seq];
  const int q_count = p.seq_query_start[seq + 1] - q_begin;
  const int tile_row0 = blockIdx.y * kFlashRows;
  if (q_count < kFlashMinQueries || tile_row0 >= q_count) return;  // uniform over the block
  const int head = blockIdx.z;
  const int kv_head = head / (p.num_heads / p.num_kv_heads);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t4 = lane & 3;

  if (threadIdx.x == 0) s_kv_end = 0;
  __syncthreads();
  if (threadIdx.x < kFlashRows && tile_row0 + int(threadIdx.x) < q_count) {
    atomicMax(&s_kv_end, p.token_context[q_begin + tile_row0 + threadIdx.x]);
  }
  __syncthreads();
  const int kv_end = s_kv_end;

  const int r_lo = tile_row0 + warp * 16 + g, r_hi = r_lo + 8;  // rows within the sequence
  const bool lo_ok = r_lo < q_count, hi_ok = r_hi < q_count;
  const int ctx_lo = lo_ok ? p.token_context[q_begin + r_lo] : 0;
  const int ctx_hi = hi_ok ? p.token_context[q_begin + r_hi] : 0;
  const bf16* q_lo = p.q + (int64_t(q_begin + r_lo) * p.num_heads + head) * kHeadDim;
  const bf16* q_hi = p.q + (int64_t(q_begin + r_hi) * p.num_heads + head) * kHeadDim;
  uint32_t qf[kSteps][4];
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    int col = s * 16 + 2 * t4;
    qf[s][0] = lo_ok ? load_u32(q_lo + col) : 0u;
    qf[s][1] = hi_ok ? load_u32(q_hi + col) : 0u;
    qf[s][2] = lo_ok ? load_u32(q_lo + col + 8) : 0u;
    qf[s][3] = hi_ok ? load_u32(q_hi + col + 8) : 0u;
  }

  float o[kDimTiles][4];
#pragma unroll
  for (int n = 0; n < kDimTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.0f, l_hi = 0.0f;
  const float scale = p.scale * kLog2e;  // scores in the log2 domain
  const int32_t* table = p.block_tables + int64_t(seq) * p.header->table_width;

  for (int kv0 = 0; kv0 < kv_end; kv0 += kTileKeys) {
    load_kv_tile<kHeadDim, kStride>(p, table, kv_head, kv0, kv_end, ks, vs);
    __syncthreads();

    float s[kKeyTiles][4];
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
      const bf16* k_row = ks + (n * 8 + g) * kStride + 2 * t4;
#pragma unroll
      for (int st = 0; st < kSteps; ++st) {
        mma_bf16_16816(s[n], qf[st], load_u32(k_row + st * 16), load_u32(k_row + st * 16 + 8));
      }
    }
    float max_lo = -INFINITY, max_hi = -INFINITY;
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        int key = kv0 + n * 8 + 2 * t4 + (j & 1);
        bool visible = key < (j < 2 ? ctx_lo : ctx_hi);
        s[n][j] = visible ? s[n][j] * scale : -INFINITY;
      }
      max_lo = fmaxf(max_lo, fmaxf(s[n][0], s[n][1]));
      max_hi = fmaxf(max_hi, fmaxf(s[n][2], s[n][3]));
    }
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
    for (int n = 0; n < kKeyTiles; ++n) {
      s[n][0] = exp2f(s[n][0] - base_lo);
      s[n][1] = exp2f(s[n][1] - base_lo);
      s[n][2] = exp2f(s[n][2] - base_hi);
      s[n][3] = exp2f(s[n][3] - base_hi);
      sum_lo += s[n][0] + s[n][1];
      sum_hi += s[n][2] + s[n][3];
    }
    l_lo = l_lo * corr_lo + sum_lo;  // this thread's columns; the quad is summed at the end
    l_hi = l_hi * corr_hi + sum_hi;
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) {
      o[n][0] *= corr_lo;
      o[n][1] *= corr_lo;
      o[n][2] *= corr_hi;
      o[n][3] *= corr_hi;
    }

    // O += P V: P's accumulator fragments are the A fragments of k-step kk (keys 16kk..16kk+15).
    const int mi = lane >> 3, mr = lane & 7;
#pragma unroll
    for (int kk = 0; kk < kTileKeys / 16; ++kk) {
      uint32_t a[4] = {pack_bf16x2(s[2 * kk][0], s[2 * kk][1]),
                       pack_bf16x2(s[2 * kk][2], s[2 * kk][3]),
                       pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                       pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      const bf16* v_rows = vs + (kk * 16 + (mi & 1) * 8 + mr) * kStride + (mi >> 1) * 8;
#pragma unroll
      for (int dt = 0; dt < kHeadDim / 16; ++dt) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, v_rows + dt * 16);
        mma_bf16_16816(o[2 * dt], a, b[0], b[1]);
        mma_bf16_16816(o[2 * dt + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();  // the tiles are overwritten next
  }

#pragma unroll
  for (int offset = 1; offset <= 2; offset <<= 1) {
    l_lo += __shfl_xor_sync(0xffffffffu, l_lo, offset);
    l_hi += __shfl_xor_sync(0xffffffffu, l_hi, offset);
  }
  const float inv_lo = l_lo > 0 ? 1.0f / l_lo : 0.0f, inv_hi = l_hi > 0 ? 1.0f / l_hi : 0.0f;
  bf16* out_lo = p.out + (int64_t(q_begin + r_lo) * p.num_heads + head) * kHeadDim + 2 * t4;
  bf16* out_hi = p.out + (int64_t(q_begin + r_hi) * p.num_heads + head) * kHeadDim + 2 * t4;
#pragma unroll
  for (int n = 0; n < kDimTiles; ++n) {
    if (lo_ok) {
      *reinterpret_cast<__nv_bfloat162*>(out_lo + n * 8) =
          __floats2bfloat162_rn(o[n][0] * inv_lo, o[n][1] * inv_lo);
    }
    if (hi_ok) {
      *reinterpret_cast<__nv_bfloat162*>(out_hi + n * 8) =
          __floats2bfloat162_rn(o[n][2] * inv_hi, o[n][3] * inv_hi);
    }
  }
}

// ---- Tiled decode attention ------------------------------------------------------------------

// One block per (row, KV head, split): all query heads of the KV head (up to kMaxGroup). Per
// 64-key tile: K/V staged in shared memory, thread (key = tid % 64) computes that key's scores
// for heads tid / 64, tid / 64 + 2, ...; one warp per head updates the running max and sum;
// thread tid accumulates output columns tid, tid + 128, ... for every head.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads) decode_attention_kernel(AttentionParams p) {
  constexpr int kStride = kHeadDim + 8;
  constexpr int kCols = (kHeadDim + kThreads - 1) / kThreads;
  __shared__ __align__(16) bf16 ks[kTileKeys * kStride];
  __shared__ __align__(16) bf16 vs[kTileKeys * kStride];
  __shared__ __align__(16) float qs[kMaxGroup][kHeadDim];
  __shared__ __align__(16) float ps[kMaxGroup][kTileKeys];
  __shared__ float s_max[kMaxGroup], s_sum[kMaxGroup], s_corr[kMaxGroup];

  const int row = blockIdx.x, kv_head = blockIdx.y, split = blockIdx.z;
  const int seq = p.token_seq[row];
  if (p.max_queries >= kFlashMinQueries && row_is_flash(p, seq, kFlashMinQueries)) return;
  const int group = p.num_heads / p.num_kv_heads;
  const int first_head = kv_head * group;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;

  const int context = p.token_context[row];
  const int per_split = (context + p.splits - 1) / p.splits;
  const int chunk = (per_split + kTileKeys - 1) / kTileKeys * kTileKeys;
  const int begin = split * chunk;
  const int end = min(context, begin + chunk);

  const float q_scale = p.scale * kLog2e;
  for (int idx = tid; idx < group * kHeadDim; idx += kThreads) {
    int h = idx / kHeadDim, d = idx % kHeadDim;
    qs[h][d] = __bfloat162float(p.q[(int64_t(row) * p.num_heads + first_head + h) * kHeadDim + d]) *
               q_scale;
  }
  if (tid < kMaxGroup) {
    s_max[tid] = -INFINITY;
    s_sum[tid] = 0.0f;
  }
  float acc[kMaxGroup][kCols];
#pragma unroll
  for (int h = 0; h < kMaxGroup; ++h) {
#pragma unroll
    for (int j = 0; j < kCols; ++j) acc[h][j] = 0.0f;
  }
  const int32_t* table = p.block_tables + int64_t(seq) * p.header->table_width;
  __syncthreads();

  for (int t0 = begin; t0 < end; t0 += kTileKeys) {
    load_kv_tile<kHeadDim, kStride>(p, table, kv_head, t0, end, ks, vs);
    __syncthreads();

    // Scores of key `key` for heads h0, h0 + 2, ... (kMaxGroup / 2 at most).
    const int key = tid % kTileKeys, h0 = tid / kTileKeys;
    float dot[kMaxGroup / 2];
#pragma unroll
    for (int i = 0; i < kMaxGroup / 2; ++i) dot[i] = 0.0f;
    const bf16* k_row = ks + key * kStride;
#pragma unroll 4
    for (int d0 = 0; d0 < kHeadDim; d0 += 8) {
      float k[8];
      load_bf16x4(k_row + d0, k);
      load_bf16x4(k_row + d0 + 4, k + 4);
#pragma unroll
      for (int i = 0; i < kMaxGroup / 2; ++i) {
        int h = h0 + 2 * i;
        if (h < group) {
          float4 qa = *reinterpret_cast<const float4*>(&qs[h][d0]);
          float4 qb = *reinterpret_cast<const float4*>(&qs[h][d0 + 4]);
          dot[i] += qa.x * k[0] + qa.y * k[1] + qa.z * k[2] + qa.w * k[3] + qb.x * k[4] +
                    qb.y * k[5] + qb.z * k[6] + qb.w * k[7];
        }
      }
    }
    const bool visible = t0 + key < end;
#pragma unroll
    for (int i = 0; i < kMaxGroup / 2; ++i) {
      int h = h0 + 2 * i;
      if (h < group) ps[h][key] = visible ? dot[i] : -INFINITY;
    }
    __syncthreads();

    for (int h = warp; h < group; h += kThreads / 32) {
      float s0 = ps[h][lane], s1 = ps[h][lane + 32];
      float old_max = s_max[h];
      float new_max = fmaxf(old_max, warp_max(fmaxf(s0, s1)));
      float base = new_max == -INFINITY ? 0.0f : new_max;
      float e0 = exp2f(s0 - base), e1 = exp2f(s1 - base);
      float sum = warp_sum(e0 + e1);
      ps[h][lane] = e0;
      ps[h][lane + 32] = e1;
      __syncwarp();
      if (lane == 0) {
        float corr = exp2f(old_max - base);
        s_corr[h] = corr;
        s_sum[h] = s_sum[h] * corr + sum;
        s_max[h] = new_max;
      }
    }
    __syncthreads();

#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int d = tid + j * kThreads;
      if (d >= kHeadDim) break;
#pragma unroll
      for (int h = 0; h < kMaxGroup; ++h) {
        if (h < group) acc[h][j] *= s_corr[h];
      }
      for (int k0 = 0; k0 < kTileKeys; k0 += 4) {
        float v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) v[u] = __bfloat162float(vs[(k0 + u) * kStride + d]);
#pragma unroll
        for (int h = 0; h < kMaxGroup; ++h) {
          if (h < group) {
            float4 w = *reinterpret_cast<const float4*>(&ps[h][k0]);
            acc[h][j] += w.x * v[0] + w.y * v[1] + w.z * v[2] + w.w * v[3];
          }
        }
      }
    }
    __syncthreads();  // tiles and ps are overwritten next
  }

#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    const int d = tid + j * kThreads;
    if (d >= kHeadDim) break;
#pragma unroll
    for (int h = 0; h < kMaxGroup; ++h) {
      if (h >= group) continue;
      const float total = s_sum[h];
      const float result = total > 0 ? acc[h][j] / total : 0.0f;
      const int64_t head_row = int64_t(row) * p.num_heads + first_head + h;
      if (p.splits == 1) {
        p.out[head_row * kHeadDim + d] = __float2bfloat16_rn(result);
      } else {
        p.partial_out[(head_row * p.splits + split) * kHeadDim + d] = result;
        if (d == 0) {
          p.partial_lse[head_row * p.splits + split] =
              total > 0 ? s_max[h] + log2f(total) : -INFINITY;
        }
      }
    }
  }
}

template <int kHeadDim>
void launch_for_head_dim(const AttentionParams& p, cudaStream_t stream) {
  const bool flash = p.max_queries >= kFlashMinQueries;
  if (flash) {
    dim3 grid(p.num_seqs, (p.max_queries + kFlashRows - 1) / kFlashRows, p.num_heads);
    flash_prefill_kernel<kHeadDim><<<grid, kThreads, 0, stream>>>(p);
    GPUFRAC_LAUNCH_CHECK();
  }
  decode_attention_kernel<kHeadDim>
      <<<dim3(p.rows, p.num_kv_heads, p.splits), kThreads, 0, stream>>>(p);
  GPUFRAC_LAUNCH_CHECK();
  if (p.splits > 1) launch_combine_splits(p, flash ? kFlashMinQueries : 0, stream);
}

}  // namespace

bool fast_attention_supported(int num_heads, int num_kv_heads, int head_dim) {
  return (head_dim == 64 || head_dim == 128) && num_kv_heads > 0 &&
         num_heads % num_kv_heads == 0 && num_heads / num_kv_heads <= kMaxGroup;
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
