// Streaming detokenization: ids go in one at a time as the model samples them, text comes out as
// deltas. A token can end in the middle of a UTF-8 character (byte-level BPE splits emoji and CJK
// characters across tokens), so bytes that may still become a character are held back until the
// next token completes them; nothing is ever emitted twice.
//
// Contract: the concatenation of every feed() result and the final finish() equals
// tokenizer.decode(all ids, skip_special_tokens) exactly: well-formed UTF-8, each ill-formed
// sequence replaced by one U+FFFD. Each delta is whole characters. One detokenizer per sequence;
// not thread-safe; the Tokenizer must outlive it.
#pragma once

#include <cstdint>
#include <string>

#include "engine/tokenizer/tokenizer.h"

namespace gpufrac::engine {

class StreamingDetokenizer {
 public:
  // skip_special_tokens: leave out special tokens (<|im_end|>, <|endoftext|>, ...), as decode does.
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = true);

  // The text that `id` completes (may be empty while a character is incomplete).
  std::string feed(int32_t id);
  // At the end of the sequence: the held bytes of an unfinished character, as U+FFFD.
  std::string finish();

  // Bytes held back waiting for the rest of a character (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;
};

}  // namespace gpufrac::engine
