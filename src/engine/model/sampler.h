// Next-token sampling on the CPU from one row of logits: greedy, temperature, top-k, top-p,
// suppressed ids, and a per-request seed.
//
// Contract:
// - sample_token() is a pure function of (logits, params): the draw uses the single uniform
//   sampling_uniform(seed, generated), so a request's tokens do not depend on batching, thread
//   count or preemption, only on its own logits.
// - temperature <= 0 (or below 1e-5): argmax, ties to the lowest id; top-k/top-p are ignored.
// - Otherwise probabilities are softmax(logits / temperature) over the allowed ids; top-k keeps
//   the k most likely (ties to the lower id), then top-p keeps the smallest most-likely set whose
//   probability (renormalised after top-k) reaches top_p; the token is drawn by inverse CDF over
//   the kept ids in ascending id order.
// - suppressed_ids and non-finite logits are never returned. If every id is excluded the result
//   is -1 (the caller suppresses a few ids of a 150k vocabulary, so this means a caller bug).
// - Thread-safe (scratch space is per thread).
#pragma once

#include <cstdint>
#include <span>

#include "engine/model/runner.h"

namespace gpufrac::engine {

int32_t sample_token(std::span<const float> logits, const SamplingParams& params);

// The uniform in (0, 1) behind the draw of step `generated` of a request with `seed`.
double sampling_uniform(uint64_t seed, int64_t generated);

}  // namespace gpufrac::engine
