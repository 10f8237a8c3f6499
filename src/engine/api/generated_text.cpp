#include "engine/api/generated_text.h"

#include <charconv>

namespace gpufrac::engine {

GeneratedText::GeneratedText(const Tokenizer* tokenizer, GeneratedTextOptions options)
    : tokenizer_(tokenizer),
      stopper_(tokenizer ? std::move(options.stop_strings) : std::vector<std::string>{}),
      min_tokens_(options.min_tokens) {
  if (tokenizer_) detokenizer_.emplace(*tokenizer_, options.skip_special_tokens);
}

const std::string& GeneratedText::add(int32_t token, FinishReason finish) {
  delta_.clear();
  ++generated_;
  if (!tokenizer_) {
    char digits[16];
    delta_ += ' ';
    delta_.append(digits, std::to_chars(digits, digits + sizeof digits, token).ptr);
    return delta_;
  }
  if (stopper_.stopped()) return delta_;
  std::string text = finish == FinishReason::kStop ? std::string() : detokenizer_->feed(token);
  if (finish != FinishReason::kNone) text += detokenizer_->finish();
  if (generated_ < min_tokens_ || stopper_.empty()) {
    delta_ = std::move(text);
    return delta_;
  }
  StopStringMatcher::Result released = stopper_.feed(text);
  delta_ = std::move(released.text);
  if (!released.stopped && finish != FinishReason::kNone) delta_ += stopper_.finish();
  return delta_;
}

}  // namespace gpufrac::engine
