#include "engine/tokenizer/byte_level.h"

#include <array>

#include "engine/tokenizer/unicode_classes.h"

namespace gpufrac::engine {
namespace {

bool is_self_mapped(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Alphabet {
  std::array<char32_t, 256> char_of_byte{};
  std::array<int16_t, 512> byte_of_char{};  // indexed by code point (all are < U+0200); -1: none
};

const Alphabet& alphabet() {
  static const Alphabet a = [] {
    Alphabet t;
    t.byte_of_char.fill(-1);
    char32_t next_extra = 0x100;
    for (int b = 0; b < 256; ++b) {
      const char32_t c = is_self_mapped(b) ? char32_t(b) : next_extra++;
      t.char_of_byte[b] = c;
      t.byte_of_char[c] = int16_t(b);
    }
    return t;
  }();
  return a;
}

}  // namespace

std::optional<std::string> byte_level_to_bytes(std::string_view token) {
  const Alphabet& a = alphabet();
  std::string bytes;
  bytes.reserve(token.size());
  for (size_t pos = 0; pos < token.size();) {
    const DecodedChar c = decode_utf8(token, pos);
    pos += c.length;
    if (c.cp >= a.byte_of_char.size() || a.byte_of_char[c.cp] < 0) return std::nullopt;
    bytes.push_back(char(a.byte_of_char[c.cp]));
  }
  return bytes;
}

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  for (const char b : bytes)
    append_utf8(out, alphabet().char_of_byte[static_cast<unsigned char>(b)]);
  return out;
}

}  // namespace gpufrac::engine
