#include <algorithm>

#include "engine/cuda/attention.h"
#include "engine/cuda/attention_internal.cuh"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device_math.cuh"
#include "engine/cuda/kernel_launch.cuh"

namespace gpufrac::engine {

namespace {

constexpr int kWarps = 4;   // per block; each walks every kWarps-th position of the range
constexpr int kUnroll = 2;  // positions per warp in flight
constexpr int kMaxSplits = 32;

__host__ __device__ inline int head_groups(int num_heads, int num_kv_heads) {
  int group = num_heads / num_kv_heads;
  return (group + kMaxGroup - 1) / kMaxGroup;
}

template <int kPerLane>
__device__ __forceinline__ void load_vector(const bf16* src, float out[kPerLane]) {
  if constexpr (kPerLane == 4) {
    load_bf16x4(src, out);
  } else if constexpr (kPerLane == 8) {
    load_bf16x4(src, out);
    load_bf16x4(src + 4, out + 4);
  } else {
#pragma unroll
    for (int d = 0; d < kPerLane; ++d) out[d] = __bfloat162float(src[d]);
  }
}

template <int kPerLane>
__global__ void __launch_bounds__(kWarps * 32) paged_attention_kernel(AttentionParams p) {
  wait_for_previous_grid();
  allow_next_grid_launch();
  constexpr int kHeadDim = kPerLane * 32;
  __shared__ float s_max[kWarps][kMaxGroup];
  __shared__ float s_sum[kWarps][kMaxGroup];
  __shared__ float s_acc[kWarps][kMaxGroup][kHeadDim];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int row = blockIdx.x;
  const int groups = head_groups(p.num_heads, p.num_kv_heads);
  const int kv_head = blockIdx.y / groups;
  const int group_size = p.num_heads / p.num_kv_heads;
  const int g0 = (blockIdx.y % groups) * kMaxGroup;
  const int heads_here = min(kMaxGroup, group_size - g0);
  const int first_head = kv_head * group_size + g0;
  const int split = blockIdx.z;

  const int context = p.token_context[row];
  const int chunk = (context + p.splits - 1) / p.splits;
  const int begin = split * chunk;
  const int end = min(context, begin + chunk);

  float q[kMaxGroup][kPerLane];
  const float q_scale = p.scale * kLog2e;  // scores in the log2 domain: exp2 below
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (g < heads_here) {
      const bf16* src =
          p.q + (int64_t(row) * p.num_heads + first_head + g) * kHeadDim + lane * kPerLane;
      load_vector<kPerLane>(src, q[g]);
#pragma unroll
      for (int d = 0; d < kPerLane; ++d) q[g][d] *= q_scale;
    }
  }
  float running_max[kMaxGroup], running_sum[kMaxGroup], acc[kMaxGroup][kPerLane];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    running_max[g] = -INFINITY;
    running_sum[g] = 0;
#pragma unroll
    for (int d = 0; d < kPerLane; ++d) acc[g][d] = 0;
  }

  const int32_t* table = p.block_tables + int64_t(p.token_seq[row]) * p.header->table_width;
  for (int t0 = begin + warp; t0 < end; t0 += kWarps * kUnroll) {
    float k[kUnroll][kPerLane], v[kUnroll][kPerLane];
    bool valid[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      int t = t0 + u * kWarps;
      valid[u] = t < end;
      if (valid[u]) {
        int64_t block = table[t / p.block_size];
        int64_t at =
            ((block * p.num_kv_heads + kv_head) * p.block_size + t % p.block_size) * kHeadDim +
            lane * kPerLane;
        load_vector<kPerLane>(p.k_cache + at, k[u]);
        load_vector<kPerLane>(p.v_cache + at, v[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (!valid[u]) continue;  // uniform across the warp
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g >= heads_here) continue;
        float dot = 0;
#pragma unroll
        for (int d = 0; d < kPerLane; ++d) dot += q[g][d] * k[u][d];
        float score = warp_sum(dot);
        float new_max = fmaxf(running_max[g], score);
        float correction = exp2f(running_max[g] - new_max);
        float weight = exp2f(score - new_max);
        running_sum[g] = running_sum[g] * correction + weight;
#pragma unroll
        for (int d = 0; d < kPerLane; ++d) acc[g][d] = acc[g][d] * correction + weight * v[u][d];
        running_max[g] = new_max;
      }
    }
  }

#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (lane == 0) {
      s_max[warp][g] = running_max[g];
      s_sum[warp][g] = running_sum[g];
    }
#pragma unroll
    for (int d = 0; d < kPerLane; ++d) s_acc[warp][g][lane * kPerLane + d] = acc[g][d];
  }
  __syncthreads();

  for (int idx = threadIdx.x; idx < heads_here * kHeadDim; idx += blockDim.x) {
    int g = idx / kHeadDim, d = idx % kHeadDim;
    float block_max = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) block_max = fmaxf(block_max, s_max[w][g]);
    float total = 0, value = 0;
    if (block_max != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        float f = exp2f(s_max[w][g] - block_max);
        total += s_sum[w][g] * f;
        value += s_acc[w][g][d] * f;
      }
    }
    int64_t head_row = int64_t(row) * p.num_heads + first_head + g;
    float result = total > 0 ? value / total : 0.0f;
    if (p.splits == 1) {
      p.out[head_row * kHeadDim + d] = __float2bfloat16_rn(result);
    } else {
      p.partial_out[(head_row * p.splits + split) * kHeadDim + d] = result;
      if (d == 0) {
        p.partial_lse[head_row * p.splits + split] =
            total > 0 ? block_max + log2f(total) : -INFINITY;
      }
    }
  }
}

// Merges the splits of one (row, head): weights 2^(lse_z - max lse). Every load of a row is
// issued at once (its log-sum-exps by the first warp, then each thread's values of all splits),
// so the kernel costs two round trips to L2 however many splits there are.
// `flash_min_queries` > 0: rows of sequences with that many queries belong to the flash kernel.
__global__ void combine_splits_kernel(AttentionParams p, int flash_min_queries) {
  static_assert(kMaxSplits <= 32, "the first warp holds one split's log-sum-exp per lane");
  __shared__ float weights[kMaxSplits];
  wait_for_previous_grid();
  allow_next_grid_launch();
  if (flash_min_queries > 0 && row_is_flash(p, p.token_seq[blockIdx.x], flash_min_queries)) {
    return;
  }
  const int64_t head_row = int64_t(blockIdx.x) * p.num_heads + blockIdx.y;
  if (threadIdx.x < 32) {
    const int z = threadIdx.x;
    const float lse = z < p.splits ? p.partial_lse[head_row * p.splits + z] : -INFINITY;
    const float top = warp_max(lse);
    weights[z] = top == -INFINITY ? 0.0f : exp2f(lse - top);
  }
  __syncthreads();
  for (int d = threadIdx.x; d < p.head_dim; d += blockDim.x) {
    const float* values = p.partial_out + head_row * p.splits * p.head_dim + d;
    float split_values[kMaxSplits];
#pragma unroll
    for (int z = 0; z < kMaxSplits; ++z) {
      split_values[z] = z < p.splits ? values[z * p.head_dim] : 0.0f;
    }
    float total = 0, value = 0;
#pragma unroll
    for (int z = 0; z < kMaxSplits; ++z) {
      total += weights[z];
      value += weights[z] * split_values[z];
    }
    p.out[head_row * p.head_dim + d] = __float2bfloat16_rn(total > 0 ? value / total : 0.0f);
  }
}

// Decode-attention blocks resident at once on `sm_count` SMs: one wave of the split grid.
int split_grid_slots(int sm_count, bool beside_flash) {
  return (beside_flash ? kDecodeBlocksBesideFlash : kDecodeBlocksPerSm) * std::max(sm_count, 1);
}
constexpr int kUnsplitWaves = 8;  // grids of this many waves or more run unsplit

}  // namespace

void launch_combine_splits(const AttentionParams& p, int flash_min_queries, cudaStream_t stream) {
  const int rows = flash_min_queries > 0 && p.decode_rows >= 0 ? p.decode_rows : p.rows;
  if (rows == 0) return;
  launch_kernel(combine_splits_kernel, dim3(rows, p.num_heads), dim3(std::min(p.head_dim, 128)), 0,
                stream, p.overlap, p, flash_min_queries);
}

int attention_splits(int rows, int num_heads, int num_kv_heads, int sm_count, int max_context,
                     bool beside_flash) {
  constexpr int kBlockCostTiles = 1, kPlannedContext = 2048;
  const int64_t blocks = int64_t(rows) * num_kv_heads * head_groups(num_heads, num_kv_heads);
  const int64_t slots = split_grid_slots(sm_count, beside_flash);
  if (blocks <= 0 || blocks >= kUnsplitWaves * slots) return 1;
  const int tiles = std::max(1, ((max_context > 0 ? max_context : kPlannedContext) + 63) / 64);
  auto cost = [&](int splits) {
    const int64_t waves = (blocks * splits + slots - 1) / slots;
    return double(waves) * ((tiles + splits - 1) / splits + kBlockCostTiles);
  };
  int best = 1;
  for (int splits = 2; splits <= std::min(kMaxSplits, tiles); ++splits) {
    if (cost(splits) < 0.9 * cost(best)) best = splits;
  }
  return best;
}

bool decode_streams_whole_contexts(int rows, int num_heads, int num_kv_heads, int sm_count) {
  const int64_t blocks = int64_t(rows) * num_kv_heads * head_groups(num_heads, num_kv_heads);
  return sm_count > 0 && 10 * blocks >= 9 * int64_t(kWholeContextBlocksPerSm) * sm_count;
}

int64_t attention_partial_floats(int num_heads, int num_kv_heads, int head_dim, int sm_count) {
  int64_t most = 0;
  const int64_t kv_blocks = int64_t(num_kv_heads) * head_groups(num_heads, num_kv_heads);
  auto most_for = [&](int sms, bool beside_flash) {
    const int64_t most_split_rows =
        kUnsplitWaves * split_grid_slots(sms, beside_flash) / std::max<int64_t>(kv_blocks, 1);
    for (int rows = 1; rows <= most_split_rows; ++rows) {
      int splits = attention_splits(rows, num_heads, num_kv_heads, sms, 0, beside_flash);
      if (splits > 1) most = std::max(most, int64_t(rows) * num_heads * splits * head_dim);
    }
  };
  most_for(sm_count, true);
  // Beside a persistent flash grid the decode rows plan for the SMs it leaves them.
  for (int sms = 1; sms <= std::max(sm_count, 1); ++sms) most_for(sms, false);
  return most;
}

bool runs_fast_attention(AttentionKernels kernels, int num_heads, int num_kv_heads, int head_dim,
                         int block_size) {
  return kernels == AttentionKernels::kFast &&
         fast_attention_supported(num_heads, num_kv_heads, head_dim, block_size);
}

int decode_kernel_stages(const AttentionParams& p) {
  const int rows = p.decode_rows >= 0 ? p.decode_rows : p.rows;
  const bool whole = p.splits == 1 && p.max_queries < kFlashMinQueries &&
                     decode_streams_whole_contexts(rows, p.num_heads, p.num_kv_heads, p.sm_count);
  return whole ? 3 : 2;
}

bool decode_attention_applies_rope(const AttentionParams& p, const QkvRopeParams& rope) {
  const int64_t rows = p.decode_rows >= 0 ? p.decode_rows : p.rows;
  const int64_t blocks =
      rows * p.num_kv_heads * head_groups(p.num_heads, p.num_kv_heads) * int64_t(p.splits);
  const int64_t slots = int64_t(decode_blocks_per_sm(decode_kernel_stages(p))) * p.sm_count;
  return runs_fast_attention(p.kernels, p.num_heads, p.num_kv_heads, p.head_dim, p.block_size) &&
         p.max_queries == 1 && p.sm_count > 0 && blocks <= slots && rope.head_dim == p.head_dim &&
         rope.qkv.data != nullptr && !rope.qkv.is_bf16 && rope.qkv.parts == 1;
}

void launch_paged_attention(const AttentionParams& p, cudaStream_t stream) {
  if (p.rows == 0) return;
  if (p.num_heads % p.num_kv_heads != 0) {
    throw_cuda_failure("launch_paged_attention", __FILE__, __LINE__,
                       "num_heads must be a multiple of num_kv_heads");
  }
  if (runs_fast_attention(p.kernels, p.num_heads, p.num_kv_heads, p.head_dim, p.block_size)) {
    launch_fast_attention(p, stream);
    return;
  }
  dim3 grid(p.rows, p.num_kv_heads * head_groups(p.num_heads, p.num_kv_heads), p.splits);
  switch (p.head_dim) {
    // clang-format off
    case 32: paged_attention_kernel<1><<<grid, kWarps * 32, 0, stream>>>(p); break;
    case 64: paged_attention_kernel<2><<<grid, kWarps * 32, 0, stream>>>(p); break;
    case 128: paged_attention_kernel<4><<<grid, kWarps * 32, 0, stream>>>(p); break;
    case 256: paged_attention_kernel<8><<<grid, kWarps * 32, 0, stream>>>(p); break;
    // clang-format on
    default:
      throw_cuda_failure("launch_paged_attention", __FILE__, __LINE__, "unsupported head_dim");
  }
  GPUFRAC_LAUNCH_CHECK();
  if (p.splits > 1) launch_combine_splits(p, 0, stream);
}

}  // namespace gpufrac::engine
