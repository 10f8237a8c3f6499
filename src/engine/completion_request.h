// Parsing and validation of an OpenAI POST /v1/completions body into an EngineRequest.
//
// Accepted: "prompt" as an array of token ids (or an array holding one such array), "model"
// (optional; must be the served name), max_tokens (default 16, capped to fit max_model_len),
// min_tokens, temperature (default 1), top_p, top_k, seed, ignore_eos, stop_token_ids, stream,
// stream_options.include_usage; n/best_of = 1, echo = false, logprobs = null, zero penalties.
// Anything else that would change the output is refused rather than ignored; unknown fields are
// ignored (clients send extras). Text prompts and "stop" strings need the tokenizer: prompt_tokens()
// in completion_request.cpp is the one place that turns a prompt into token ids.
//
// Never throws on any input: every problem becomes a RequestError with the HTTP status, a message
// naming the field and the fix, and the field as `param`. Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "engine/engine.h"

namespace gpufrac::engine {

struct CompletionLimits {
  std::string served_model_name;
  int vocab_size = 0;
  int max_model_len = 0;
};

struct CompletionRequest {
  EngineRequest engine;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a final chunk with usage
};

struct RequestError {
  int status = 400;
  std::string message;
  std::string param;  // the offending field, or empty
};

std::variant<CompletionRequest, RequestError> parse_completion_request(
    std::string_view body, const CompletionLimits& limits);

}  // namespace gpufrac::engine
