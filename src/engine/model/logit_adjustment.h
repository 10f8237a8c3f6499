// How a logit is changed before sampling by logit_bias and the three penalties, as vLLM (and
// OpenAI, for presence/frequency) define them; one formula for the CPU sampler (sampler.cpp) and
// the GPU sampler (gpu_sampler.cu).
//
//   x = logit + bias                                       logit_bias
//   if the id is in the prompt or was generated:           repetition_penalty (vLLM's rule)
//     x = x > 0 ? x / repetition : x * repetition
//   x -= frequency * output_count                          frequency_penalty
//   x -= presence  if output_count > 0                     presence_penalty
//
// Neutral values (bias 0, repetition 1, frequency 0, presence 0) leave x bit for bit unchanged.
// Only ids that carry a bias, occur in the prompt (when the repetition penalty is on) or were
// generated (when any penalty is on) are adjusted: the runner gets them as a sparse list
// (LogitAdjustment, runner.h) rather than a vocabulary-sized array.
//
// C++17 and free of host-only headers, so .cu files can include it.
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace gpufrac::engine {

struct Penalties {
  float presence = 0;    // subtracted once from every generated id; OpenAI's range [-2, 2]
  float frequency = 0;   // subtracted per occurrence in the output; [-2, 2]
  float repetition = 1;  // divides positive / multiplies negative logits of seen ids; (0, 2]

  GPUFRAC_HOST_DEVICE bool active() const {
    return presence != 0 || frequency != 0 || repetition != 1;
  }
};

GPUFRAC_HOST_DEVICE inline float adjust_logit(float logit, float bias, int32_t output_count,
                                              bool in_prompt, const Penalties& penalties) {
  float x = logit + bias;
  if (in_prompt || output_count > 0) {
    x = x > 0 ? x / penalties.repetition : x * penalties.repetition;
  }
  x -= penalties.frequency * float(output_count);
  if (output_count > 0) x -= penalties.presence;
  return x;
}

}  // namespace gpufrac::engine
