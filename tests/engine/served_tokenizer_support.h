// The real Qwen3 tokenizer as `gpufrac serve --model tiny` loads it (load_served_tokenizer with the
// preset rules, data from scripts/install-deps), once per test process, for the text-endpoint
// tests; and a ServedTokenizer without one, as a server without the data has.
#pragma once

#include <gtest/gtest.h>

#include "engine/api/served_tokenizer.h"

namespace gpufrac::testing {

inline constexpr int kQwen3VocabSize = 151936;  // the tiny preset's embedding rows

inline const engine::ServedTokenizer& served_qwen3() {
  static const engine::ServedTokenizer served = [] {
    engine::ServedTokenizerOptions options;
    options.model = "tiny";
    options.model_is_preset = true;
    options.vocab_size = kQwen3VocabSize;
    engine::ServedTokenizer s = engine::load_served_tokenizer(options);
    if (!s.get())
      ADD_FAILURE() << "no Qwen3 tokenizer (run scripts/install-deps): " << s.unavailable;
    return s;
  }();
  if (!served.get()) throw std::runtime_error("missing tokenizer data");
  return served;
}

inline const engine::ServedTokenizer& served_nothing() {
  static const engine::ServedTokenizer none = [] {
    engine::ServedTokenizer s;
    s.unavailable = "test server without tokenizer data";
    return s;
  }();
  return none;
}

}  // namespace gpufrac::testing
