// Parsing and validation of an OpenAI POST /v1/completions body into an EngineRequest, and the
// fields it shares with /v1/chat/completions (chat_request.h).
//
// Accepted: "prompt" as text (a string, or an array holding one string; needs the tokenizer,
// encoded with add_special_tokens, default true) or as token ids (an array, or an array holding
// one such array), "model" (optional; must be the served name), max_tokens (completions: default
// 16, capped to fit max_model_len), min_tokens, temperature (default 1), top_p, top_k, seed,
// ignore_eos, stop (a string or up to kMaxStopStrings strings; needs the tokenizer),
// stop_token_ids, skip_special_tokens (default true), stream, stream_options.include_usage,
// resume_token_ids (gpufrac's, resume_request.h);
// n/best_of = 1, echo = false, logprobs = null, zero penalties. Anything else that would change
// the output is refused rather than ignored; unknown fields are ignored (clients send extras).
//
// Never throws on any input: every problem becomes a RequestError with the HTTP status, a message
// naming the field and the fix, and the field as `param`. Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/json.h"
#include "engine/engine.h"
#include "engine/api/request_fields.h"
#include "engine/api/served_tokenizer.h"

namespace gpufrac::engine {

inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopStringBytes = 1024;

struct CompletionLimits {
  std::string served_model_name;
  int vocab_size = 0;
  int max_model_len = 0;
  const ServedTokenizer* text = nullptr;  // null or without a tokenizer: token ids only
};

// One generation request of either endpoint, ready for the engine and the response writer.
struct CompletionRequest {
  EngineRequest engine;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a final chunk with usage
  std::vector<std::string> stop_strings;
  bool skip_special_tokens = true;
  std::vector<int32_t> resume_token_ids;  // completions only: see resume_request.h
};

std::variant<CompletionRequest, RequestError> parse_completion_request(
    std::string_view body, const CompletionLimits& limits);

// For the parsers of both endpoints (throw RequestInvalid):
// The tokenizer, or a 400 saying why the server has none and how to get it.
const Tokenizer& require_tokenizer(const CompletionLimits& limits, const std::string& what,
                                   const std::string& param);
// Text encoded by the tokenizer: every id must lie in the model's vocabulary (serve refuses a
// tokenizer that reaches past it; this keeps the engine's precondition whatever the setup).
void check_encoded_ids(const std::vector<int32_t>& ids, const CompletionLimits& limits,
                       const char* param);
// Everything after the prompt (r.engine.prompt, already set): lengths, sampling, stops, stream.
// `chat`: max_completion_tokens is read before max_tokens, and the default is whatever room the
// context leaves (vLLM's rule) instead of 16.
void parse_generation_fields(const Json& body, const CompletionLimits& limits, bool chat,
                             CompletionRequest& r);
// n, best_of, penalties, logit_bias: refused unless neutral.
void refuse_unsupported_sampling(const Json& body);

}  // namespace gpufrac::engine
