// GeneratedText: the text of one generated sequence, token by token, as the server streams it.
// Ids go through a StreamingDetokenizer (deltas are whole UTF-8 characters, nothing is emitted
// twice) and then a StopStringMatcher (a stop string may span tokens; text that could still begin
// one is held back and released once it cannot, or at the end; the stop string itself and
// everything after it are never emitted).
//
// Rules, as vLLM applies them: the token that ends a sequence as kStop (EOS or a stop token id)
// adds no text of its own; special tokens add none when skip_special_tokens; stop strings are
// looked for only from the min_tokens-th generated token on (earlier text passes straight out).
// Without a tokenizer (a server that has none) a token's text is its id, " 1234", and there are
// no stop strings.
//
// One per request, used on the engine thread only (not thread-safe); the Tokenizer must outlive it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/sequence.h"
#include "engine/tokenizer/detokenizer.h"
#include "engine/tokenizer/stop_matcher.h"
#include "engine/tokenizer/tokenizer.h"

namespace gpufrac::engine {

struct GeneratedTextOptions {
  std::vector<std::string> stop_strings;
  int min_tokens = 0;
  bool skip_special_tokens = true;
};

class GeneratedText {
 public:
  // `tokenizer` may be null (ids as text).
  GeneratedText(const Tokenizer* tokenizer, GeneratedTextOptions options);

  // The text `token` releases; `finish` is the engine's verdict on it (kNone while generation
  // goes on). When a stop string completes, the text before it is returned and stopped() turns
  // true; from then on every call returns nothing. After a token with `finish` set, everything
  // held back has been released. The reference stays valid until the next call.
  const std::string& add(int32_t token, FinishReason finish);

  bool stopped() const { return stopper_.stopped(); }

 private:
  const Tokenizer* tokenizer_;
  std::optional<StreamingDetokenizer> detokenizer_;
  StopStringMatcher stopper_;
  int min_tokens_;
  int generated_ = 0;
  std::string delta_;
};

}  // namespace gpufrac::engine
