// Text prompts of an exact token count, as the server counts them.
//
// A text prompt's length is whatever the server's tokenizer (and, for chat, its chat template and
// generation prompt) makes of it, so bench asks the server: a TokenCounter counts the tokens of
// the request a text would become (server_token_counter.h asks POST /tokenize). ExactTextBuilder
// draws words from a built-in list of common English words (seeded), finds the longest run of
// them that stays within the target by a secant-and-bisection search on the word count, then
// tops it up with a filler piece that the server counts as exactly one token (checked at
// calibration) and checks the final text once more: every text it returns was counted exactly.
// With a BPE tokenizer that splits at spaces (Qwen, Llama) one word is about one token and a
// prompt takes 1 to 3 counts.
//
// Texts of different seeds differ from their first words on (13 random words from 100 after
// a chat template's 3-token head: no 16-token block is shared). A chat template's own fixed head
// (Llama 3's system header, say) is shared by every request, as it is for every chat client.
//
// Thread-safety: TokenCounter::count and ExactTextBuilder::build may be called from many threads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gpufrac {

class TokenCounter {
 public:
  virtual ~TokenCounter() = default;
  // Tokens of the request whose prompt is `text`, as the server counts them. Thread-safe;
  // throws RuntimeFailure when it cannot tell.
  virtual int count(const std::string& text) const = 0;
  // Where the counts come from, for messages ("POST http://127.0.0.1:8001/tokenize").
  virtual std::string source() const = 0;
};

class ExactTextBuilder {
 public:
  // Calibrates against `counter` (about 3 counts): the filler piece and the shortest prompt.
  // Throws RuntimeFailure when no filler piece counts as one token. Keeps a reference.
  explicit ExactTextBuilder(const TokenCounter& counter);

  // A text of exactly `tokens` tokens (as counter counts it), words drawn from `seed`. Throws
  // RuntimeFailure when `tokens` < shortest() or the search does not reach it.
  std::string build(int tokens, uint64_t seed) const;

  // Tokens of the shortest prompt it can build (the request's own overhead plus one token).
  int shortest() const { return shortest_; }
  const std::string& filler() const { return filler_; }

 private:
  std::string fill(const std::string& base, int pieces) const;

  const TokenCounter& counter_;
  std::string filler_;  // " the" or the like: one token wherever it is appended
  int overhead_ = 0;    // tokens of a request beyond its text's own (template, BOS), estimated
  int shortest_ = 1;
};

struct TextPromptSpec {
  int tokens = 0;
  uint64_t seed = 0;
};

// Builds the texts of `specs` (result[i] for specs[i]) on up to `parallel` threads, so at most
// that many counts are in flight. `on_progress(done, total)`, when set, is called on the calling
// thread about every `progress_interval_s` and once at the end; if it throws, the workers stop and
// the exception propagates. The first RuntimeFailure of any worker ends the whole build.
std::vector<std::string> build_exact_texts(
    const TokenCounter& counter, const std::vector<TextPromptSpec>& specs, int parallel,
    const std::function<void(int64_t done, int64_t total)>& on_progress = {},
    double progress_interval_s = 0.25);

}  // namespace gpufrac
