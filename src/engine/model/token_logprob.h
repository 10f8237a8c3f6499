// TokenLogprob: what a runner returns per sampled row when a request asks for logprobs
// (SamplingParams::logprobs, StepResult::logprobs in runner.h). C++17 and free of host-only
// headers, so the GPU kernels that fill it (cuda/sampling_extras.cu) can include it.
#pragma once

#include <cstdint>

namespace gpufrac::engine {

// A token's log-probability under the model: log_softmax of the step's raw logits, before
// logit_bias, penalties, temperature and truncation (vLLM's default, "raw_logprobs").
struct TokenLogprob {
  int32_t id = -1;
  float logprob = 0;
};

// The most top logprobs a row may ask for (vLLM's default max_logprobs).
inline constexpr int kMaxTopLogprobs = 20;
// Entries per sampled row in StepResult::logprobs: the sampled token's, then the top ones.
inline constexpr int kLogprobsStride = kMaxTopLogprobs + 1;

}  // namespace gpufrac::engine
