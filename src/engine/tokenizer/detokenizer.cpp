#include "engine/tokenizer/detokenizer.h"

#include "engine/tokenizer/utf8.h"

namespace gpufrac::engine {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string StreamingDetokenizer::feed(int32_t id) {
  pending_.append(tokenizer_->token_bytes(id, skip_special_tokens_));
  // Emit everything up to a truncated sequence at the end (which the next token may complete).
  size_t complete = 0;
  while (complete < pending_.size()) {
    const Utf8Step step = utf8_step(pending_, complete);
    if (step.status == Utf8Status::kTruncated) break;
    complete += step.length;
  }
  std::string delta;
  append_lossy_utf8(std::string_view(pending_).substr(0, complete), delta);
  pending_.erase(0, complete);
  return delta;
}

std::string StreamingDetokenizer::finish() {
  std::string delta;
  append_lossy_utf8(pending_, delta);
  pending_.clear();
  return delta;
}

}  // namespace gpufrac::engine
