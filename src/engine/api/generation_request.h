// Parsing and validation of one generation body (POST /v1/completions or /v1/chat/completions)
// into a GenerationRequest, in one pass over the body.
//
// Read, in this order (the first problem found is the one answered):
//   JSON        the body must be a JSON object; "model" (optional) must be the served name;
//               completions need "prompt"
//   choices     n (default 1, at most kMaxChoices: that many sequences of the prompt)
//   refusals    anything that would change the output in a way this server does not do is refused
//               rather than ignored: best_of other than n; completions: suffix, echo with
//               logprobs (prompt logprobs are not computed); chat: echo, tools, tool_choice
//               other than "none"/"auto", a response_format other than {"type": "text"},
//               continue_final_message. Unknown fields are ignored (clients send extras).
//   prompt      completions: "prompt" as text (a string, or an array holding one string; needs the
//               tokenizer, encoded with add_special_tokens, default true) or as token ids (an
//               array, or an array holding one such array); chat: "messages" through the chat
//               template (chat_prompt.h)
//   lengths     the prompt must leave room in max_model_len; max_completion_tokens (else
//               max_tokens) must fit there with it; default 16 (or less, to fit)
//               for completions, whatever room the context leaves for chat (vLLM's rule);
//               min_tokens <= max_tokens
//   stops       ignore_eos, stop_token_ids, stop (a string or up to kMaxStopStrings strings of at
//               most kMaxStopStringBytes; needs the tokenizer; empty ones are ignored),
//               skip_special_tokens (default true). Chat, unless ignore_eos: the template's
//               end-of-turn ids (<|im_end|>, ...) join stop_token_ids, so generation stops at the
//               end of the assistant's turn with "stop"
//   sampling    temperature (default 1, in [0, 100]), top_p (default 1, in (0, 1]), top_k
//               (default and -1: off), seed, min_p (default 0: off, in [0, 1]),
//               presence_penalty and frequency_penalty (default 0, in [-2, 2]),
//               repetition_penalty (default 1, > 0), logit_bias ({"<token id>": bias in
//               [-100, 100]}; ids in the vocabulary); logprobs: completions "logprobs": k,
//               chat "logprobs": true with "top_logprobs": k (which needs it), k in
//               [0, kMaxTopLogprobs]
//   streaming   stream, stream_options.include_usage (only with stream)
//   resumption  completions: resume_token_ids (gpufrac's, for the node's router: resume_request.h)
//   echo        completions: the prompt's text before each choice's text (echo_text)
//
// Never throws on any input: every problem becomes a RequestError with the HTTP status, a message
// naming the field and the fix, and the field as `param`. Pure function; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/api/request_fields.h"
#include "engine/engine.h"

namespace gpufrac::engine {

inline constexpr size_t kMaxStopStrings = 16;
inline constexpr int kMaxChoices = 128;  // "n", as OpenAI allows
inline constexpr size_t kMaxStopStringBytes = 1024;

// The endpoint a body came to: what its prompt is, some rules, and the response's layout.
enum class GenerationEndpoint { kCompletions, kChatCompletions };

// What one generation body asks of the engine and of the response writer.
struct GenerationRequest {
  EngineRequest engine;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a final chunk with usage
  std::vector<std::string> stop_strings;
  bool skip_special_tokens = true;
  std::vector<int32_t> resume_token_ids;  // completions only: see resume_request.h
  // "echo" (completions): the prompt's text, which starts every choice's text (a text prompt as
  // sent; token ids decoded as generated ids are). Empty without echo.
  std::string echo_text;
};

std::variant<GenerationRequest, RequestError> parse_generation_request(std::string_view body,
                                                                       const RequestLimits& limits,
                                                                       GenerationEndpoint endpoint);

}  // namespace gpufrac::engine
