#include "engine/cuda/sampling_extras.h"

#include <cfloat>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device_math.cuh"
#include "engine/model/logit_adjustment.h"

namespace gpufrac::engine {

namespace {

constexpr int kAdjustThreads = 256;
constexpr int kLogprobThreads = 1024;

// The token the row's placeholder stands for (the previous step's sample), or -1 when the row
// feeds a real token.
__device__ __forceinline__ int32_t placeholder_token(const StepArrays& a, int r,
                                                     const int32_t* previous_sampled) {
  const int32_t fed = a.token_ids[a.sample_token[r]];
  return fed < 0 ? previous_sampled[-1 - fed] : -1;
}

__global__ void __launch_bounds__(kAdjustThreads)
    adjust_kernel(float* logits, int vocab, StepArrays a, const int32_t* previous_sampled) {
  const int r = blockIdx.x;
  const SamplingExtras& x = a.extras;
  const Penalties penalties = x.penalties[r];
  const int begin = x.adjust_start[r], end = x.adjust_start[r + 1];
  const int total_entries = x.adjust_start[gridDim.x];
  float* row = logits + int64_t(r) * vocab;
  const int32_t placeholder = penalties.active() ? placeholder_token(a, r, previous_sampled) : -1;
  bool listed = false;
  for (int j = begin + int(threadIdx.x); j < end; j += blockDim.x) {
    const int32_t id = x.adjust_ids[j];
    const int32_t packed = x.adjust_counts[j];
    int32_t count = packed >> 1;
    if (id == placeholder) {
      ++count;
      listed = true;
    }
    const float raw = row[id];
    x.saved_logits[j] = raw;
    row[id] = adjust_logit(raw, x.adjust_bias[j], count, (packed & 1) != 0, penalties);
  }
  listed = __syncthreads_or(listed);
  if (threadIdx.x != 0) return;
  int32_t saved_id = -1;
  if (placeholder >= 0 && placeholder < vocab && !listed) {
    const float raw = row[placeholder];
    x.saved_logits[total_entries + r] = raw;
    row[placeholder] = adjust_logit(raw, 0, 1, false, penalties);
    saved_id = placeholder;
  }
  x.saved_placeholder_ids[r] = saved_id;
}

__global__ void __launch_bounds__(kAdjustThreads)
    restore_kernel(float* logits, int vocab, StepArrays a) {
  const int r = blockIdx.x;
  const SamplingExtras& x = a.extras;
  const int begin = x.adjust_start[r], end = x.adjust_start[r + 1];
  float* row = logits + int64_t(r) * vocab;
  for (int j = begin + int(threadIdx.x); j < end; j += blockDim.x) {
    row[x.adjust_ids[j]] = x.saved_logits[j];
  }
  if (threadIdx.x == 0 && x.saved_placeholder_ids[r] >= 0) {
    row[x.saved_placeholder_ids[r]] = x.saved_logits[x.adjust_start[gridDim.x] + r];
  }
}

// True when `c` comes after `previous` in better()'s order: the next candidate for a top list.
__device__ __forceinline__ bool after(Best c, Best previous) {
  return c.value < previous.value || (c.value == previous.value && c.index > previous.index);
}

__global__ void __launch_bounds__(kLogprobThreads)
    logprobs_kernel(const float* logits, int vocab, StepArrays a, const int32_t* sampled,
                    TokenLogprob* out) {
  __shared__ float s_scratch[32];
  __shared__ Best s_best[32];
  const int r = blockIdx.x;
  const int top = min(a.extras.logprobs[r], kMaxTopLogprobs);
  TokenLogprob* out_row = out + int64_t(r) * kLogprobsStride;
  if (top < 0) {  // uniform over the block
    for (int j = threadIdx.x; j < kLogprobsStride; j += blockDim.x) out_row[j] = TokenLogprob{};
    return;
  }
  const float* row = logits + int64_t(r) * vocab;
  float local_max = -INFINITY;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    if (isfinite(row[i])) local_max = fmaxf(local_max, row[i]);
  }
  const float max_logit = block_reduce_max(local_max, s_scratch);
  float local_sum = 0;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    if (isfinite(row[i])) local_sum += expf(row[i] - max_logit);
  }
  const float log_total = max_logit + logf(block_sum(local_sum, s_scratch));
  if (threadIdx.x == 0) {
    const int32_t id = sampled[r];
    const bool known = id >= 0 && id < vocab && isfinite(row[id]);
    out_row[0] = {id, known ? row[id] - log_total : -INFINITY};
  }
  Best previous{INFINITY, -1};
  int found = 0;
  for (; found < top; ++found) {
    Best best{-INFINITY, INT_MAX};
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
      const float v = row[i];
      if (!isfinite(v)) continue;
      const Best candidate{v, i};
      if (after(candidate, previous) && better(candidate, best)) best = candidate;
    }
    best = block_argmax(best, s_best);
    if (best.index == INT_MAX) break;  // fewer finite ids than `top`; uniform over the block
    if (threadIdx.x == 0) out_row[1 + found] = {best.index, best.value - log_total};
    previous = best;
  }
  for (int j = 1 + found + int(threadIdx.x); j < kLogprobsStride; j += blockDim.x) {
    out_row[j] = TokenLogprob{};
  }
}

}  // namespace

void launch_logit_adjustments(float* logits, int rows, int vocab, const StepArrays& arrays,
                              const int32_t* previous_sampled, cudaStream_t stream) {
  if (rows == 0) return;
  adjust_kernel<<<rows, kAdjustThreads, 0, stream>>>(logits, vocab, arrays, previous_sampled);
  GPUFRAC_LAUNCH_CHECK();
}

void launch_restore_logits(float* logits, int rows, int vocab, const StepArrays& arrays,
                           cudaStream_t stream) {
  if (rows == 0) return;
  restore_kernel<<<rows, kAdjustThreads, 0, stream>>>(logits, vocab, arrays);
  GPUFRAC_LAUNCH_CHECK();
}

void launch_logprobs(const float* logits, int rows, int vocab, const StepArrays& arrays,
                     const int32_t* sampled, TokenLogprob* out, cudaStream_t stream) {
  if (rows == 0) return;
  logprobs_kernel<<<rows, kLogprobThreads, 0, stream>>>(logits, vocab, arrays, sampled, out);
  GPUFRAC_LAUNCH_CHECK();
}

}  // namespace gpufrac::engine
