// vLLM's helper endpoints, for clients that need exact token counts (gpufrac bench builds prompts
// of an exact length with them):
//   POST /tokenize    {"prompt": text, "add_special_tokens": true}
//                  or {"messages": [...], "add_generation_prompt": true,
//                      "add_special_tokens": false, "chat_template_kwargs": {...}}
//                      (chat_prompt.h: the prompt a chat completion with them would send)
//                  -> {"count": n, "max_model_len": m, "tokens": [ids], "token_strs": null}
//                     (return_token_strs: "token_strs" spells each token as tokenizer.json does)
//   POST /detokenize  {"tokens": [ids]} -> {"prompt": text}  (special tokens included)
// "model" is optional and must be the served name. More tokens than max_model_len, ids outside
// the model's vocabulary, wrong types and a server without a tokenizer are 4xx RequestErrors.
// Never throws on any input. Pure functions; thread-safe.
#pragma once

#include <string_view>
#include <variant>

#include "common/json.h"
#include "engine/api/request_fields.h"

namespace gpufrac::engine {

std::variant<Json, RequestError> tokenize_reply(std::string_view body, const RequestLimits& limits);
std::variant<Json, RequestError> detokenize_reply(std::string_view body,
                                                  const RequestLimits& limits);

}  // namespace gpufrac::engine
