#include "engine/api/resume_request.h"

#include <algorithm>
#include <string>

#include "engine/api/request_fields.h"

namespace gpufrac::engine {

std::vector<int32_t> parse_resume_token_ids(const Json& body, const RequestLimits& limits,
                                            const EngineRequest& request) {
  const Json* ids = field(body, "resume_token_ids");
  if (!ids) return {};
  if (!ids->is_array())
    fail("'resume_token_ids' must be an array of token ids", "resume_token_ids");
  std::vector<int32_t> resumed;
  resumed.reserve(ids->size());
  for (size_t i = 0; i < ids->size(); ++i) {
    resumed.push_back(get_token_id((*ids)[i], limits.vocab_size,
                                   "resume_token_ids[" + std::to_string(i) + "]",
                                   "resume_token_ids"));
  }
  if (int64_t(resumed.size()) >= request.stop.max_tokens) {
    fail("'resume_token_ids' holds " + std::to_string(resumed.size()) + " ids, and max_tokens is " +
             std::to_string(request.stop.max_tokens) +
             ": nothing is left to generate; send fewer ids",
         "resume_token_ids");
  }
  return resumed;
}

void continue_after(EngineRequest& request, const std::vector<int32_t>& resumed) {
  if (resumed.empty()) return;
  int k = static_cast<int>(resumed.size());
  request.prompt.insert(request.prompt.end(), resumed.begin(), resumed.end());
  request.stop.max_tokens -= k;
  request.stop.min_tokens = std::max(0, request.stop.min_tokens - k);
  request.resumed_tokens = k;
}

}  // namespace gpufrac::engine
