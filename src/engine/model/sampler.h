// Next-token sampling on the CPU from one row of logits: logit_bias and penalties, greedy,
// temperature, min-p, top-k, top-p, suppressed ids, and a per-request seed; and the row's
// logprobs.
//
// Contract:
// - sample_token() is a pure function of (logits, params): the draw uses the single uniform
//   sampling_uniform(seed, generated), so a request's tokens do not depend on batching, thread
//   count or preemption, only on its own logits.
// - First the adjustments (params.adjustments and params.resolved_placeholder, with
//   params.penalties: logit_adjustment.h) change a copy of the logits; everything below sees the
//   adjusted values.
// - temperature <= 0 (or below 1e-5): argmax, ties to the lowest id; min-p/top-k/top-p are
//   ignored.
// - Otherwise probabilities are softmax(logits / temperature) over the allowed ids; min-p keeps
//   the ids with z >= max z + log(min_p) (z = logit / temperature: probability at least min_p x
//   the largest), then top-k keeps the k most likely (ties to the lower id), then top-p keeps the
//   smallest most-likely set whose probability (renormalised after top-k) reaches top_p; the
//   token is drawn by inverse CDF over the kept ids in ascending id order (vLLM's order of
//   min-p, top-k, top-p).
// - suppressed_ids and non-finite logits are never returned. If every id is excluded the result
//   is -1 (the caller suppresses a few ids of a 150k vocabulary, so this means a caller bug).
// - Thread-safe (scratch space is per thread).
#pragma once

#include <cstdint>
#include <span>

#include "engine/model/runner.h"

namespace gpufrac::engine {

int32_t sample_token(std::span<const float> logits, const SamplingParams& params);

// The logprobs (runner.h TokenLogprob: log_softmax of the raw `logits`) of `sampled` into out[0]
// and of the `top` most likely ids into out[1..top], most likely first, ties to the lower id.
// Non-finite logits count as probability 0 and are never among the top; a `sampled` id outside
// the row gets {sampled, -inf}. `out` holds at least 1 + top entries.
void token_logprobs(std::span<const float> logits, int32_t sampled, int top,
                    std::span<TokenLogprob> out);

// The uniform in (0, 1) behind the draw of step `generated` of a request with `seed`.
double sampling_uniform(uint64_t seed, int64_t generated);

}  // namespace gpufrac::engine
