// The chat template step of /v1/chat/completions and /tokenize: a body's "messages" through the
// model's chat template and the tokenizer, as prompt token ids.
//
// Messages: {"role": "system"|"user"|"assistant", "content": a string, an array of
// {"type": "text", "text": ...} parts (joined with "\n", as vLLM does), or null}. Also read:
// add_generation_prompt (true), chat_template_kwargs.enable_thinking (true; Qwen3's template),
// add_special_tokens (false). Refused: tool calls in a message, content parts of another type, and
// roles the template does not know. Needs the tokenizer and a chat template (400s saying how to
// get them otherwise).
//
// Throws RequestInvalid (request_fields.h) for every problem; its callers run under
// parse_request(). Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "common/json.h"
#include "engine/api/request_fields.h"

namespace gpufrac::engine {

std::vector<int32_t> chat_prompt_ids(const Json& body, const RequestLimits& limits);

}  // namespace gpufrac::engine
