// Encoding and decoding; loading tokenizer.json is in tokenizer_load.cpp.
#include "engine/tokenizer/tokenizer.h"

#include <cstring>

#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/utf8.h"

namespace gpufrac::engine {

Tokenizer::Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  encode_into(text, options, ids);
  return ids;
}

void Tokenizer::encode_into(std::string_view text, const EncodeOptions& options,
                            std::vector<int32_t>& ids) const {
  if (options.add_special_tokens) ids.insert(ids.end(), prefix_ids_.begin(), prefix_ids_.end());
  if (!options.parse_special) {
    encode_plain(text, ids);
  } else {
    size_t segment_start = 0;
    for (size_t pos = next_added_start(text, 0); pos < text.size();
         pos = next_added_start(text, pos)) {
      int32_t id;
      if (const size_t length = match_added(text, pos, id)) {
        encode_plain(text.substr(segment_start, pos - segment_start), ids);
        ids.push_back(id);
        pos += length;
        segment_start = pos;
      } else {
        ++pos;
      }
    }
    encode_plain(text.substr(segment_start), ids);
  }
  if (options.add_special_tokens) ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
}

size_t Tokenizer::next_added_start(std::string_view text, size_t pos) const {
  const auto& first_bytes = added_trie_[0].children;
  if (first_bytes.empty()) return text.size();
  if (first_bytes.size() == 1) {  // Qwen and Llama: every added token starts with '<'
    const void* found = std::memchr(text.data() + pos, first_bytes[0].first, text.size() - pos);
    return found ? size_t(static_cast<const char*>(found) - text.data()) : text.size();
  }
  while (pos < text.size() && !starts_added_[static_cast<unsigned char>(text[pos])]) ++pos;
  return pos;
}

int32_t Tokenizer::child_of(int32_t node, unsigned char byte) const {
  for (const auto& [edge, child] : added_trie_[node].children) {
    if (edge == byte) return child;
  }
  return -1;
}

size_t Tokenizer::match_added(std::string_view text, size_t pos, int32_t& id) const {
  size_t length = 0;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const int32_t next = child_of(node, static_cast<unsigned char>(text[i]));
    if (next < 0) break;
    node = next;
    if (added_trie_[node].id >= 0) {
      id = added_trie_[node].id;
      length = i + 1 - pos;
    }
  }
  return length;
}

void Tokenizer::add_to_trie(std::string_view content, int32_t id) {
  int32_t node = 0;
  for (const char c : content) {
    int32_t next = child_of(node, static_cast<unsigned char>(c));
    if (next < 0) {
      next = int32_t(added_trie_.size());
      added_trie_[node].children.emplace_back(static_cast<unsigned char>(c), next);
      added_trie_.emplace_back();
    }
    node = next;
  }
  if (added_trie_[node].id < 0) added_trie_[node].id = id;
}

void Tokenizer::encode_plain(std::string_view text, std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  // One decoding pass for NFC and the pre-tokenizer.
  thread_local std::vector<uint8_t> chars;
  std::string normalized;
  text = scan_characters(text, nfc_, normalized, chars);
  thread_local std::vector<std::string_view> pieces;
  pieces.clear();
  split_pre_tokens(text, chars, pattern_, pieces);
  bpe_->encode_words(pieces, ids);
}

std::string_view Tokenizer::token_bytes(int32_t id, bool skip_special_tokens) const {
  if (id < 0 || id >= id_limit()) return {};
  const TokenInfo& t = tokens_[id];
  if (skip_special_tokens && t.special) return {};
  return t.bytes;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  for (const int32_t id : ids) bytes.append(token_bytes(id, skip_special_tokens));
  std::string text;
  text.reserve(bytes.size());
  append_lossy_utf8(bytes, text);
  return text;
}

std::string Tokenizer::token_string(int32_t id) const {
  if (id < 0 || id >= id_limit() || !tokens_[id].known) return {};
  const TokenInfo& t = tokens_[id];
  return t.added ? t.bytes : bytes_to_byte_level(t.bytes);
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  if (!token.empty()) {
    int32_t id;
    if (match_added(token, 0, id) == token.size()) return id;
  }
  if (const auto bytes = byte_level_to_bytes(token)) {
    if (const int32_t id = bpe_->id_of_bytes(*bytes); id >= 0) return id;
  }
  return std::nullopt;
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < id_limit() && tokens_[id].special;
}

}  // namespace gpufrac::engine
