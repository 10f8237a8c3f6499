#include "engine/cuda/gpu_sampler.h"

#include <algorithm>
#include <cfloat>

#include "common/seeded_random.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device_math.cuh"

namespace gpufrac::engine {

namespace {

constexpr int kThreads = 1024;
constexpr int kSplitThreads = 256;  // per block of the split scan
constexpr int kMaxSplits = 128;     // vocabulary slices per row
constexpr int kMinSliceIds = 1024;
constexpr int kSharedSuppressed = 64;
constexpr float kGreedyBelow = 1e-5f;  // as the CPU sampler
// Top-p histogram: z within kWindow of the max, kBins bins per pass (two passes).
constexpr float kWindow = 32.0f;
constexpr int kBins = 1024;
constexpr float kBinsPerUnit = kBins / kWindow;

struct Row {
  const float* logits;
  int vocab;
  float inv_temperature;
  const int32_t* suppressed;  // first kSharedSuppressed in shared memory, the rest global
  const int32_t* suppressed_rest;
  int num_suppressed;
};

// z of id i, or -inf when i may not be sampled (non-finite logit, suppressed).
__device__ float scaled_logit(const Row& row, int i) {
  float x = row.logits[i];
  if (!isfinite(x)) return -INFINITY;
  int shared = min(row.num_suppressed, kSharedSuppressed);
  for (int j = 0; j < shared; ++j) {
    if (row.suppressed[j] == i) return -INFINITY;
  }
  for (int j = kSharedSuppressed; j < row.num_suppressed; ++j) {
    if (row.suppressed_rest[j] == i) return -INFINITY;
  }
  return x * row.inv_temperature;
}

// Order-preserving map of floats to unsigned ints (larger float, larger key).
__device__ __forceinline__ uint32_t order_key(float x) {
  uint32_t bits = __float_as_uint(x);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// The row's draw key (temperature draws only): with the id it fixes the id's Gumbel noise.
__device__ __forceinline__ uint64_t draw_key(const StepArrays& a, int r) {
  return mix64(splitmix64(a.seed[r]) ^ uint64_t(a.generated[r]));
}

// The score an allowed id (z = scaled_logit > -inf) competes with: z itself (greedy), or z plus
// Gumbel noise from (row key, id), whose argmax is a draw from softmax(z).
__device__ __forceinline__ float draw_score(float z, bool greedy, uint64_t row_key, int i) {
  if (greedy) return z;
  uint64_t bits = splitmix64_nth(row_key, uint64_t(i + 1));
  float u = (float(bits >> 40) + 0.5f) * 0x1.0p-24f;  // in (0, 1)
  return z - logf(-logf(u));
}

// Greedy rows and temperature rows without top-k / top-p: every allowed id competes, so the
// vocabulary can be scanned in independent slices.
__device__ __forceinline__ bool row_is_separable(const StepArrays& a, int r, int vocab) {
  const float temperature = a.temperature[r];
  if (!(temperature >= kGreedyBelow)) return true;
  const int top_k = a.top_k[r];
  const float top_p = a.top_p[r];
  const float min_p = a.extras.min_p != nullptr ? a.extras.min_p[r] : 0.0f;
  return !(top_k > 0 && top_k < vocab) && !(top_p > 0 && top_p < 1) && !(min_p > 0);
}

// The k-th largest order key among allowed ids (radix selection, 8 bits per pass, counts
// aggregated per warp with match_any so that equal digits cost one shared atomic). Returns 1
// (keep everything allowed) when fewer than k ids are allowed.
__device__ uint32_t top_k_threshold(const Row& row, int k, uint32_t* hist, int* state) {
  int lane = threadIdx.x & 31;
  uint32_t prefix = 0, mask = 0;
  int remaining = k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int j = threadIdx.x; j < 256; j += blockDim.x) hist[j] = 0;
    __syncthreads();
    for (int base = 0; base < row.vocab; base += blockDim.x) {
      int i = base + threadIdx.x;
      float z = i < row.vocab ? scaled_logit(row, i) : -INFINITY;
      uint32_t key = order_key(z);
      bool active = z > -INFINITY && (key & mask) == prefix;
      uint32_t digit = active ? (key >> shift) & 255u : 256u;
      uint32_t peers = __match_any_sync(0xffffffffu, digit);
      if (active && lane == __ffs(peers) - 1) atomicAdd(&hist[digit], uint32_t(__popc(peers)));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int cumulative = 0, chosen = -1;
      for (int d = 255; d >= 0; --d) {
        if (cumulative + int(hist[d]) >= remaining) {
          chosen = d;
          break;
        }
        cumulative += int(hist[d]);
      }
      state[0] = chosen;
      state[1] = remaining - cumulative;
    }
    __syncthreads();
    int chosen = state[0];
    remaining = state[1];
    __syncthreads();  // state is rewritten next pass
    if (chosen < 0) return 1;
    prefix |= uint32_t(chosen) << shift;
    mask |= 255u << shift;
  }
  return prefix;
}

// The order key of max z + log(min_p) over allowed ids: ids below it are less likely than min_p x
// the most likely one. 1 (keep everything allowed) when no id is allowed.
__device__ uint32_t min_p_threshold(const Row& row, float min_p, float* scratch) {
  float local = -INFINITY;
  for (int i = threadIdx.x; i < row.vocab; i += blockDim.x) {
    local = fmaxf(local, scaled_logit(row, i));
  }
  const float max_z = block_reduce_max(local, scratch);
  if (!(max_z > -INFINITY)) return 1;
  return order_key(max_z + logf(min_p));
}

// Inclusive prefix sum of one value per thread over the block (blockDim.x == kBins threads).
__device__ float block_inclusive_scan(float value, float* scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    float other = __shfl_up_sync(0xffffffffu, value, offset);
    if (lane >= offset) value += other;
  }
  __syncthreads();
  if (lane == 31) scratch[warp] = value;
  __syncthreads();
  if (warp == 0) {
    float total = lane < (blockDim.x >> 5) ? scratch[lane] : 0.0f;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      float other = __shfl_up_sync(0xffffffffu, total, offset);
      if (lane >= offset) total += other;
    }
    scratch[lane] = total;
  }
  __syncthreads();
  return value + (warp > 0 ? scratch[warp - 1] : 0.0f);
}

struct TopP {
  int bin = kBins - 1;      // ids with bin(d) < bin are kept, and those in `bin` with
  int sub_bin = kBins - 1;  // sub_bin(d) <= sub_bin
  float max_z = 0;
};

__device__ __forceinline__ int bin_of(float d) { return int(d * kBinsPerUnit); }
__device__ __forceinline__ int sub_bin_of(float d, int bin) {
  return min(kBins - 1, max(0, int((d * kBinsPerUnit - float(bin)) * kBins)));
}

// The top-p cut over the ids with order key >= threshold_k, in two weighted histogram passes
// over d = max z - z (ids with d >= kWindow weigh less than e^-32 each and never make the cut).
__device__ TopP top_p_cut(const Row& row, uint32_t threshold_k, float top_p, float* mass,
                          float* scratch, int* state) {
  TopP cut;
  float local_max = -INFINITY;
  for (int i = threadIdx.x; i < row.vocab; i += blockDim.x) {
    float z = scaled_logit(row, i);
    if (z > -INFINITY && order_key(z) >= threshold_k) local_max = fmaxf(local_max, z);
  }
  {
    float m = warp_max(local_max);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = m;
    __syncthreads();
    m = (threadIdx.x & 31) < (blockDim.x >> 5) ? scratch[threadIdx.x & 31] : -INFINITY;
    cut.max_z = warp_max(m);
  }
  float before = 0, target = 0;
  for (int pass = 0; pass < 2; ++pass) {
    mass[threadIdx.x] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < row.vocab; i += blockDim.x) {
      float z = scaled_logit(row, i);
      if (!(z > -INFINITY) || order_key(z) < threshold_k) continue;
      float d = cut.max_z - z;
      if (d >= kWindow) continue;
      int bin = bin_of(d);
      if (pass == 0) {
        atomicAdd(&mass[bin], __expf(-d));
      } else if (bin == cut.bin) {
        atomicAdd(&mass[sub_bin_of(d, bin)], __expf(-d));
      }
    }
    __syncthreads();
    float mine = mass[threadIdx.x];
    float inclusive = block_inclusive_scan(mine, scratch);
    if (pass == 0) {
      // The total is the last inclusive value; thread kBins - 1 publishes it.
      if (threadIdx.x == kBins - 1) mass[0] = inclusive;  // safe: all reads of mass are done
      __syncthreads();
      target = top_p * mass[0];
      before = 0;
    }
    if (threadIdx.x == 0) state[0] = kBins - 1;  // rounding fallback: keep the whole window
    __syncthreads();
    float exclusive = inclusive - mine;
    if (before + inclusive >= target && before + exclusive < target) state[0] = threadIdx.x;
    __syncthreads();
    int chosen = state[0];
    if (threadIdx.x == chosen) state[1] = __float_as_int(before + exclusive);
    __syncthreads();
    float mass_below = __int_as_float(state[1]);
    __syncthreads();
    if (pass == 0) {
      cut.bin = chosen;
      before = mass_below;
    } else {
      cut.sub_bin = chosen;
    }
  }
  return cut;
}

// Split scan: block (r, slice) takes the best score of row r's ids in its slice of the
// vocabulary (Best{-inf, INT_MAX} when none is allowed) for sampler_kernel to merge. Rows that
// need the whole vocabulary at once (top-k / top-p) are left to sampler_kernel.
__global__ void __launch_bounds__(kSplitThreads) split_scan_kernel(const float* logits, int vocab,
                                                                   StepArrays a, Best* slices) {
  __shared__ int32_t s_suppressed[kSharedSuppressed];
  __shared__ Best s_best[32];
  const int r = blockIdx.x, slice = blockIdx.y;
  if (!row_is_separable(a, r, vocab)) return;  // uniform over the block
  const int suppressed_begin = a.suppressed_start[r];
  const int num_suppressed = a.suppressed_start[r + 1] - suppressed_begin;
  for (int j = threadIdx.x; j < min(num_suppressed, kSharedSuppressed); j += blockDim.x) {
    s_suppressed[j] = a.suppressed_ids[suppressed_begin + j];
  }
  __syncthreads();
  const float temperature = a.temperature[r];
  const bool greedy = !(temperature >= kGreedyBelow);
  Row row{logits + int64_t(r) * vocab, vocab, greedy ? 1.0f : 1.0f / temperature, s_suppressed,
          a.suppressed_ids + suppressed_begin, num_suppressed};
  const uint64_t row_key = greedy ? 0 : draw_key(a, r);
  const int per_slice = (vocab + gridDim.y - 1) / gridDim.y;
  const int begin = slice * per_slice, end = min(vocab, begin + per_slice);
  Best best{-INFINITY, INT_MAX};
  for (int i = begin + threadIdx.x; i < end; i += blockDim.x) {
    float z = scaled_logit(row, i);
    if (!(z > -INFINITY)) continue;
    Best candidate{draw_score(z, greedy, row_key, i), i};
    if (better(candidate, best)) best = candidate;
  }
  best = block_argmax(best, s_best);
  if (threadIdx.x == 0) slices[int64_t(r) * gridDim.y + slice] = best;
}

__global__ void __launch_bounds__(kThreads) sampler_kernel(const float* logits, int vocab,
                                                           StepArrays a, int32_t* out_tokens,
                                                           const Best* slices, int num_slices) {
  __shared__ int32_t s_suppressed[kSharedSuppressed];
  __shared__ uint32_t s_hist[256];
  __shared__ float s_mass[kBins];
  __shared__ float s_scratch[32];
  __shared__ Best s_best[32];
  __shared__ int s_state[2];

  const int r = blockIdx.x;
  if (slices != nullptr && row_is_separable(a, r, vocab)) {  // merge the split scan's winners
    Best best{-INFINITY, INT_MAX};
    for (int j = threadIdx.x; j < num_slices; j += blockDim.x) {
      const Best candidate = slices[int64_t(r) * num_slices + j];
      if (better(candidate, best)) best = candidate;
    }
    best = block_argmax(best, s_best);
    if (threadIdx.x == 0) out_tokens[r] = best.index == INT_MAX ? -1 : best.index;
    return;
  }
  const int suppressed_begin = a.suppressed_start[r];
  const int num_suppressed = a.suppressed_start[r + 1] - suppressed_begin;
  for (int j = threadIdx.x; j < min(num_suppressed, kSharedSuppressed); j += blockDim.x) {
    s_suppressed[j] = a.suppressed_ids[suppressed_begin + j];
  }
  __syncthreads();

  const float temperature = a.temperature[r];
  const bool greedy = !(temperature >= kGreedyBelow);
  Row row{logits + int64_t(r) * vocab, vocab, greedy ? 1.0f : 1.0f / temperature, s_suppressed,
          a.suppressed_ids + suppressed_begin, num_suppressed};

  uint32_t threshold_k = 1;
  TopP cut;
  bool use_top_p = false;
  uint64_t row_key = 0;
  if (!greedy) {
    int top_k = a.top_k[r];
    if (top_k > 0 && top_k < vocab) threshold_k = top_k_threshold(row, top_k, s_hist, s_state);
    // Min-p and top-k both keep an upper set of z: their intersection is the stricter threshold.
    const float min_p = a.extras.min_p != nullptr ? a.extras.min_p[r] : 0.0f;
    if (min_p > 0) threshold_k = max(threshold_k, min_p_threshold(row, min_p, s_scratch));
    float top_p = a.top_p[r];
    if (top_p > 0 && top_p < 1) {
      use_top_p = true;
      cut = top_p_cut(row, threshold_k, top_p, s_mass, s_scratch, s_state);
    }
    row_key = draw_key(a, r);
  }

  Best best{-INFINITY, INT_MAX};
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    float z = scaled_logit(row, i);
    if (!(z > -INFINITY)) continue;
    if (!greedy) {
      if (order_key(z) < threshold_k) continue;
      if (use_top_p) {
        float d = cut.max_z - z;
        if (d >= kWindow) continue;
        int bin = bin_of(d);
        if (bin > cut.bin || (bin == cut.bin && sub_bin_of(d, bin) > cut.sub_bin)) continue;
      }
    }
    const Best candidate{draw_score(z, greedy, row_key, i), i};
    if (better(candidate, best)) best = candidate;
  }
  best = block_argmax(best, s_best);
  if (threadIdx.x == 0) out_tokens[r] = best.index == INT_MAX ? -1 : best.index;
}

int num_slices(int vocab) {
  return std::max(1, std::min(kMaxSplits, (vocab + kMinSliceIds - 1) / kMinSliceIds));
}

}  // namespace

uint64_t sampler_split_scratch_bytes(int rows) {
  return uint64_t(std::max(rows, 1)) * kMaxSplits * sizeof(Best);
}

void launch_sampler(const float* logits, int rows, int vocab, const StepArrays& arrays,
                    int32_t* out_tokens, cudaStream_t stream, void* split_scratch) {
  if (rows == 0) return;
  Best* slices = static_cast<Best*>(split_scratch);
  const int splits = num_slices(vocab);
  if (slices != nullptr) {
    split_scan_kernel<<<dim3(rows, splits), kSplitThreads, 0, stream>>>(logits, vocab, arrays,
                                                                        slices);
    GPUFRAC_LAUNCH_CHECK();
  }
  sampler_kernel<<<rows, kThreads, 0, stream>>>(logits, vocab, arrays, out_tokens, slices, splits);
  GPUFRAC_LAUNCH_CHECK();
}

}  // namespace gpufrac::engine
