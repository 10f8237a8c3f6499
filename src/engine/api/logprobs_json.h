// LogprobsJson: the logprobs of one generated choice in OpenAI's layouts, built token by token as
// the response sinks (openai_server_sinks.h) receive them.
//
// - completions: {"tokens": [...], "token_logprobs": [...], "top_logprobs": [{text: logprob}],
//   "text_offset": [...]}. Each top_logprobs object holds the k most likely ids and the sampled
//   one (OpenAI's "up to logprobs + 1" entries), keyed by their text; a text that two ids share
//   keeps the likelier. text_offset is each token's offset in the concatenated token texts, in
//   Unicode characters, as vLLM counts it.
// - chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
//   "bytes"}, ...]}]} with exactly the k most likely ids in top_logprobs.
//
// A token's text is its id decoded alone, special tokens included and an incomplete UTF-8
// character as U+FFFD (vLLM's rule); its bytes are the token's raw bytes. Without a tokenizer both
// are " 1234", the id as the response text shows it. -inf (and anything below) is written as
// -9999: JSON has no infinity, and vLLM writes the same. The logprobs themselves are the model's
// raw ones (TokenLogprob, token_logprob.h).
//
// One per choice, on the engine thread only (not thread-safe); the Tokenizer must outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/json.h"
#include "engine/api/generation_request.h"
#include "engine/model/token_logprob.h"
#include "engine/tokenizer/tokenizer.h"

namespace gpufrac::engine {

class LogprobsJson {
 public:
  // `tokenizer` may be null (ids as text).
  LogprobsJson(GenerationEndpoint layout, const Tokenizer* tokenizer);

  // One generated token: GeneratedToken::logprobs (the sampled token's, then the top ones).
  void add(std::span<const TokenLogprob> logprobs);
  bool empty() const { return count_ == 0; }
  // The tokens added since the last take(), in the endpoint's layout; offsets keep counting.
  Json take();

 private:
  std::string text_of(int32_t id) const;
  Json bytes_of(int32_t id) const;

  bool chat_;
  const Tokenizer* tokenizer_;
  size_t next_offset_ = 0;
  size_t count_ = 0;
  Json tokens_, token_logprobs_, top_logprobs_, text_offset_;  // completions
  Json content_;                                               // chat
};

}  // namespace gpufrac::engine
