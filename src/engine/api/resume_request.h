// gpufrac's "resume_token_ids" field of POST /v1/completions: the token ids an earlier run of the
// same request had already generated when it was cut (its engine died). The node's router sends
// the request again with them, and the engine answers with the rest of that run:
// - the ids follow the prompt (the engine prefills them), max_tokens and min_tokens count from the
//   start of the interrupted run, and sampling continues with that run's draw number, so a greedy
//   or seeded request produces exactly the tokens the uninterrupted run would have;
// - the text of the new tokens continues the text of the resumed ones (a character split at the
//   cut, or a stop string spanning it, come out as in one run);
// - usage counts the whole run: prompt_tokens without the resumed ids, completion_tokens with them.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "common/json.h"
#include "engine/api/request_fields.h"
#include "engine/engine.h"

namespace gpufrac::engine {

// The field's ids (each in the vocabulary, fewer than the request's max_tokens), or none when it
// is absent or null. Call once max_tokens and min_tokens are read. Throws RequestInvalid (400).
std::vector<int32_t> parse_resume_token_ids(const Json& body, const RequestLimits& limits,
                                            const EngineRequest& request);

// Makes `request` (parsed as the interrupted run was) continue after `resumed` ids: they are
// appended to the prompt, max_tokens and min_tokens lose as many, sampling starts at draw
// resumed.size().
void continue_after(EngineRequest& request, const std::vector<int32_t>& resumed);

}  // namespace gpufrac::engine
