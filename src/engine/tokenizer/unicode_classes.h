// Unicode facts for the tokenizer: UTF-8 decoding that never fails, and per-code-point flags
// (pre-tokenizer class, NFC quick-check, combining class, Python whitespace) from the generated
// tables (unicode_tables_generated.h, Unicode version in kUnicodeVersion).
//
// Contract: decode_utf8 reads one code point at `pos`; bytes that do not start a well-formed
// UTF-8 sequence (stray continuation bytes, overlongs, surrogates, truncated sequences) come back
// one byte at a time as kInvalidBase + byte, a value above U+10FFFF that is class "other", has
// combining class 0 and encodes back to the same single byte. So text that is not valid UTF-8
// still round-trips byte for byte. All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/tokenizer/unicode_tables_generated.h"

namespace gpufrac::engine {

inline constexpr char32_t kInvalidBase = 0x110000;

enum class CharClass : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kWhitespace = 3 };

namespace unicode_flag {
inline constexpr uint8_t kClassMask = 3;
inline constexpr uint8_t kNfcNo = 4;
inline constexpr uint8_t kNfcMaybe = 8;
inline constexpr uint8_t kCombining = 16;
inline constexpr uint8_t kPythonSpace = 32;
}  // namespace unicode_flag

constexpr uint8_t unicode_flags(char32_t cp) {
  if (cp >= 0x110000) return 0;  // invalid byte: other, starter
  const uint16_t block = unicode_data::kFlagBlockIndex[cp >> unicode_data::kBlockShift];
  constexpr uint32_t kBlockMask = (1u << unicode_data::kBlockShift) - 1;
  return unicode_data::kFlagBlocks[(uint32_t(block) << unicode_data::kBlockShift) |
                                   (cp & kBlockMask)];
}

constexpr CharClass char_class(char32_t cp) {
  return CharClass(unicode_flags(cp) & unicode_flag::kClassMask);
}

// Canonical combining class (0 for starters and invalid bytes).
uint8_t combining_class(char32_t cp);

struct DecodedChar {
  char32_t cp;
  uint32_t length;  // bytes consumed, 1..4
};

// Precondition: pos < text.size().
inline DecodedChar decode_utf8(std::string_view text, size_t pos) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  const unsigned char b0 = s[pos];
  if (b0 < 0x80) return {b0, 1};
  auto cont = [&](size_t i) { return i < n && (s[i] & 0xC0) == 0x80; };
  if (b0 >= 0xC2 && b0 <= 0xDF && cont(pos + 1)) {
    return {char32_t((b0 & 0x1F) << 6 | (s[pos + 1] & 0x3F)), 2};
  }
  if (b0 >= 0xE0 && b0 <= 0xEF && cont(pos + 1) && cont(pos + 2)) {
    const char32_t cp = (b0 & 0x0F) << 12 | (s[pos + 1] & 0x3F) << 6 | (s[pos + 2] & 0x3F);
    if (cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) return {cp, 3};
  }
  if (b0 >= 0xF0 && b0 <= 0xF4 && cont(pos + 1) && cont(pos + 2) && cont(pos + 3)) {
    const char32_t cp = (b0 & 0x07) << 18 | (s[pos + 1] & 0x3F) << 12 | (s[pos + 2] & 0x3F) << 6 |
                        (s[pos + 3] & 0x3F);
    if (cp >= 0x10000 && cp <= 0x10FFFF) return {cp, 4};
  }
  return {kInvalidBase + b0, 1};
}

// Appends the UTF-8 of cp (or the raw byte of an invalid-byte value).
void append_utf8(std::string& out, char32_t cp);

// Python's str.strip(): removes leading and trailing characters for which str.isspace() holds.
std::string_view python_strip(std::string_view text);

}  // namespace gpufrac::engine
