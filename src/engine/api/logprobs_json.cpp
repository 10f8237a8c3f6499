#include "engine/api/logprobs_json.h"

#include <charconv>

namespace gpufrac::engine {

namespace {

constexpr float kMinLogprob = -9999.0f;

double clamped(float logprob) {
  return logprob >= kMinLogprob ? double(logprob) : double(kMinLogprob);
}

// Unicode characters in valid UTF-8 text: the bytes that are not continuation bytes.
size_t characters(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace

LogprobsJson::LogprobsJson(GenerationEndpoint layout, const Tokenizer* tokenizer)
    : chat_(layout == GenerationEndpoint::kChatCompletions), tokenizer_(tokenizer) {}

std::string LogprobsJson::text_of(int32_t id) const {
  if (tokenizer_) return tokenizer_->decode(std::span<const int32_t>(&id, 1), false);
  char digits[16];
  std::string text = " ";
  text.append(digits, std::to_chars(digits, digits + sizeof digits, id).ptr);
  return text;
}

Json LogprobsJson::bytes_of(int32_t id) const {
  Json bytes = Json::array();
  const std::string text =
      tokenizer_ ? std::string(tokenizer_->token_bytes(id, false)) : text_of(id);
  for (char c : text) bytes.push_back(static_cast<unsigned char>(c));
  return bytes;
}

void LogprobsJson::add(std::span<const TokenLogprob> logprobs) {
  if (logprobs.empty()) return;
  ++count_;
  const TokenLogprob& sampled = logprobs[0];
  const std::span<const TokenLogprob> top = logprobs.subspan(1);
  const std::string text = text_of(sampled.id);
  if (chat_) {
    Json entries = Json::array();
    for (const TokenLogprob& t : top) {
      if (t.id < 0) continue;
      entries.push_back(
          {{"token", text_of(t.id)}, {"logprob", clamped(t.logprob)}, {"bytes", bytes_of(t.id)}});
    }
    content_.push_back({{"token", text},
                        {"logprob", clamped(sampled.logprob)},
                        {"bytes", bytes_of(sampled.id)},
                        {"top_logprobs", std::move(entries)}});
    return;
  }
  Json likeliest = Json::object();
  for (const TokenLogprob& t : top) {
    if (t.id >= 0) likeliest.emplace(text_of(t.id), clamped(t.logprob));  // keeps the first
  }
  likeliest.emplace(text, clamped(sampled.logprob));
  tokens_.push_back(text);
  token_logprobs_.push_back(clamped(sampled.logprob));
  top_logprobs_.push_back(std::move(likeliest));
  text_offset_.push_back(next_offset_);
  next_offset_ += characters(text);
}

Json LogprobsJson::take() {
  Json out;
  if (chat_) {
    out = {{"content", content_.is_null() ? Json::array() : std::move(content_)}};
    content_ = Json();
  } else {
    auto array = [](Json& column) {
      Json taken = column.is_null() ? Json::array() : std::move(column);
      column = Json();
      return taken;
    };
    out = {{"tokens", array(tokens_)},
           {"token_logprobs", array(token_logprobs_)},
           {"top_logprobs", array(top_logprobs_)},
           {"text_offset", array(text_offset_)}};
  }
  count_ = 0;
  return out;
}

}  // namespace gpufrac::engine
