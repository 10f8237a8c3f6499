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

// A starter that is NFC_Quick_Check=Yes (`flags`: its unicode_flags): NFC never changes text across
// the boundary before it (nothing before it can reorder past it or compose with it), so the text
// on either side of it normalizes independently.
constexpr bool is_nfc_safe_boundary(uint8_t flags) {
  return !(flags & (unicode_flag::kNfcNo | unicode_flag::kNfcMaybe | unicode_flag::kCombining));
}

// NFC_Quick_Check (UAX #15) fed one character at a time: fails once a character is NFC_QC=No or
// Maybe, or a combining mark follows one of a higher class (not in canonical order).
class NfcQuickCheck {
 public:
  void add_ascii() { last_ccc_ = 0; }
  // `flags`: unicode_flags(cp).
  void add(char32_t cp, uint8_t flags) {
    if (flags & (unicode_flag::kNfcNo | unicode_flag::kNfcMaybe)) passed_ = false;
    const uint8_t ccc = (flags & unicode_flag::kCombining) ? combining_class(cp) : 0;
    if (ccc != 0 && last_ccc_ > ccc) passed_ = false;
    last_ccc_ = ccc;
  }
  bool passed() const { return passed_; }

 private:
  uint8_t last_ccc_ = 0;
  bool passed_ = true;
};

struct DecodedChar {
  char32_t cp;
  uint32_t length;  // bytes consumed, 1..4
};

// Precondition: pos < text.size(). Always inlined: the pre-tokenizer and NFC call it once per
// non-ASCII character (out of line, the call and its bounds checks were 13% of a cold encode).
[[gnu::always_inline]] inline DecodedChar decode_utf8(std::string_view text, size_t pos) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data()) + pos;
  const size_t left = text.size() - pos;
  const unsigned b0 = s[0];
  if (b0 < 0x80) return {b0, 1};
  auto cont = [s](size_t i) { return (s[i] & 0xC0) == 0x80; };
  if (b0 < 0xE0) {  // C2..DF: 2 bytes (80..C1 never start a character)
    if (b0 >= 0xC2 && left >= 2 && cont(1)) return {char32_t((b0 & 0x1F) << 6 | (s[1] & 0x3F)), 2};
  } else if (b0 < 0xF0) {  // 3 bytes: U+0800..U+FFFF less the surrogates
    if (left >= 3 && cont(1) && cont(2)) {
      const char32_t cp = (b0 & 0x0F) << 12 | (s[1] & 0x3F) << 6 | (s[2] & 0x3F);
      if (cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) return {cp, 3};
    }
  } else if (b0 <= 0xF4 && left >= 4 && cont(1) && cont(2) && cont(3)) {  // U+10000..U+10FFFF
    const char32_t cp =
        (b0 & 0x07) << 18 | (s[1] & 0x3F) << 12 | (s[2] & 0x3F) << 6 | (s[3] & 0x3F);
    if (cp >= 0x10000 && cp <= 0x10FFFF) return {cp, 4};
  }
  return {kInvalidBase + b0, 1};
}

// Appends the UTF-8 of cp (or the raw byte of an invalid-byte value).
void append_utf8(std::string& out, char32_t cp);

// Python's str.strip(): removes leading and trailing characters for which str.isspace() holds.
std::string_view python_strip(std::string_view text);

}  // namespace gpufrac::engine
