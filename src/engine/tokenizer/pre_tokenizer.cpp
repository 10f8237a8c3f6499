#include "engine/tokenizer/pre_tokenizer.h"

#include <array>
#include <bit>
#include <cstring>
#include <span>

#include "engine/tokenizer/nfc.h"
#include "engine/tokenizer/unicode_classes.h"

namespace gpufrac::engine {
namespace {

constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr int kLengthShift = 2;
static_assert(std::endian::native == std::endian::little,
              "CharReader::run_end reads 8 bytes as one");

// What scan_characters writes for an ASCII byte.
constexpr std::array<uint8_t, 128> kAsciiChars = [] {
  std::array<uint8_t, 128> t{};
  for (int i = 0; i < 128; ++i) t[i] = uint8_t(char_class(char32_t(i))) | 1 << kLengthShift;
  return t;
}();

// The characters of one text, as scan_characters recorded them.
class CharReader {
 public:
  CharReader(std::string_view text, std::span<const uint8_t> chars)
      : text_(text), chars_(chars.data()) {}

  size_t size() const { return text_.size(); }

  // Precondition for cls/length: pos < size() and a character starts at pos.
  CharClass cls(size_t pos) const { return CharClass(chars_[pos] & unicode_flag::kClassMask); }
  size_t length(size_t pos) const { return chars_[pos] >> kLengthShift; }
  CharClass class_at(size_t pos) const { return pos < size() ? cls(pos) : CharClass(255); }

  // End of the run of characters of class `cls` starting at pos. Continuation bytes carry their
  // character's class, so the run is scanned byte by byte, eight at a time where possible (the
  // first byte of another class is a character's first byte).
  size_t run_end(size_t pos, CharClass cls) const {
    constexpr uint64_t kOnes = 0x0101010101010101ull;
    const uint64_t want = uint64_t(cls) * kOnes;
    for (; pos + 8 <= size(); pos += 8) {
      uint64_t eight;
      std::memcpy(&eight, chars_ + pos, 8);
      const uint64_t differs = (eight & unicode_flag::kClassMask * kOnes) ^ want;
      if (differs) return pos + __builtin_ctzll(differs) / 8;  // little-endian: lowest byte first
    }
    while (pos < size() && CharClass(chars_[pos] & unicode_flag::kClassMask) == cls) ++pos;
    return pos;
  }

  size_t newline_run_end(size_t pos) const {
    while (pos < size() && (text_[pos] == '\r' || text_[pos] == '\n')) ++pos;
    return pos;
  }

  // The byte at pos, '\0' past the end (a character's first byte: ASCII characters are
  // themselves, other characters start with a byte >= 0x80).
  char byte(size_t pos) const { return pos < size() ? text_[pos] : '\0'; }

 private:
  std::string_view text_;
  const uint8_t* chars_;
};

char ascii_lower(char c) {
  return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c;
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d) at pos (text[pos] == '\''): the end of the match, or 0.
size_t match_contraction(const CharReader& r, size_t pos) {
  const size_t n = pos + 1;
  const char a = ascii_lower(r.byte(n));
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return n + 1;
  if ((a == 'r' || a == 'v') && ascii_lower(r.byte(n + 1)) == 'e') return n + 2;
  if (a == 'l' && ascii_lower(r.byte(n + 1)) == 'l') return n + 2;
  // U+017F LATIN SMALL LETTER LONG S case-folds to 's' (bytes C5 BF).
  if (r.byte(n) == '\xC5' && r.byte(n + 1) == '\xBF') return n + 2;
  return 0;
}

// The end of the leftmost-first match at pos (pos < size); always > pos.
size_t match_at(const CharReader& r, size_t pos, PreTokenizerPattern pattern) {
  const char b = r.byte(pos);
  const CharClass cls = r.cls(pos);
  const size_t next = pos + r.length(pos);
  if (b == '\'') {
    if (const size_t end = match_contraction(r, pos)) return end;
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (cls == CharClass::kLetter) return r.run_end(next, CharClass::kLetter);
  if (cls != CharClass::kNumber && b != '\r' && b != '\n' &&
      r.class_at(next) == CharClass::kLetter) {
    return r.run_end(next, CharClass::kLetter);
  }
  // \p{N} or \p{N}{1,3}
  if (cls == CharClass::kNumber) {
    if (pattern == PreTokenizerPattern::kQwen2) return next;
    size_t end = next;
    for (int i = 1; i < 3 && r.class_at(end) == CharClass::kNumber; ++i) end += r.length(end);
    return end;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  if (cls == CharClass::kOther) {
    return r.newline_run_end(r.run_end(next, CharClass::kOther));
  }
  if (b == ' ' && r.class_at(next) == CharClass::kOther) {
    return r.newline_run_end(r.run_end(next, CharClass::kOther));
  }
  // b is whitespace: \s*[\r\n]+ | \s+(?!\S) | \s+
  size_t end = pos;
  size_t last_char_start = pos;
  size_t after_last_newline = 0;
  while (r.class_at(end) == CharClass::kWhitespace) {
    const char d = r.byte(end);
    last_char_start = end;
    end += r.length(end);
    if (d == '\r' || d == '\n') after_last_newline = end;
  }
  if (after_last_newline) return after_last_newline;
  if (end == r.size()) return end;
  // Followed by a non-space: leave the run's last character to start the next piece.
  return last_char_start > pos ? last_char_start : end;
}

}  // namespace

std::optional<PreTokenizerPattern> pre_tokenizer_pattern_from_regex(std::string_view regex) {
  if (regex == kQwen2Regex) return PreTokenizerPattern::kQwen2;
  if (regex == kLlama3Regex) return PreTokenizerPattern::kLlama3;
  return std::nullopt;
}

namespace {

// Records a non-ASCII character (or invalid byte) of `flags` and `length` at chars[at].
void record_char(uint8_t* chars, size_t at, uint8_t flags, uint32_t length) {
  const uint8_t cls = flags & unicode_flag::kClassMask;
  chars[at] = uint8_t(cls | length << kLengthShift);
  // Its continuation bytes (what lies past the character is overwritten by the next ones).
  chars[at + 1] = chars[at + 2] = chars[at + 3] = cls;
}

// Records every character of text[from, to) (no NFC check).
void record_chars(std::string_view text, size_t from, size_t to, uint8_t* chars) {
  for (size_t pos = from; pos < to;) {
    const DecodedChar c = decode_utf8(text, pos);
    record_char(chars, pos, unicode_flags(c.cp), c.length);
    pos += c.length;
  }
}

}  // namespace

std::string_view scan_characters(std::string_view text, bool normalize_nfc, std::string& normalized,
                                 std::vector<uint8_t>& chars) {
  constexpr uint64_t kHighBits = 0x8080808080808080ull;
  chars.resize(text.size() + 3);
  NfcQuickCheck nfc;
  size_t safe_boundary = 0;  // the last safe boundary seen (nfc.h)
  size_t copied = 0;         // once normalizing: text[0, copied) is in `normalized`, as NFC
  size_t shift = 0;          // modulo 2^64: an input position's index in the output
  for (size_t pos = 0; pos < text.size();) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      // ASCII is a safe boundary that passes the check; eight bytes at once where all are ASCII.
      uint64_t eight = kHighBits;
      if (pos + 8 <= text.size()) std::memcpy(&eight, text.data() + pos, 8);
      const size_t end = eight & kHighBits ? pos + 1 : pos + 8;
      for (; pos < end; ++pos) {
        chars[pos + shift] = kAsciiChars[static_cast<unsigned char>(text[pos])];
      }
      nfc.add_ascii();
      safe_boundary = pos - 1;
      continue;
    }
    const DecodedChar c = decode_utf8(text, pos);
    const uint8_t flags = unicode_flags(c.cp);
    record_char(chars.data(), pos + shift, flags, c.length);
    pos += c.length;
    if (!normalize_nfc) continue;
    if (is_nfc_safe_boundary(flags)) safe_boundary = pos - c.length;
    nfc.add(c.cp, flags);
    if (nfc.passed()) continue;
    // Normalize from the last safe boundary to the next one; the text after it is checked anew.
    const size_t end = nfc_span_end(text, pos - c.length);
    if (copied == 0) normalized.clear();
    normalized.append(text.substr(copied, safe_boundary - copied));
    const size_t span_start = normalized.size();
    append_nfc_span(text.substr(safe_boundary, end - safe_boundary), normalized);
    chars.resize(normalized.size() + (text.size() - end) + 3);
    record_chars(normalized, span_start, normalized.size(), chars.data());
    shift = normalized.size() - end;
    copied = safe_boundary = pos = end;
    nfc = NfcQuickCheck();
  }
  if (copied == 0) return text;
  normalized.append(text.substr(copied));
  return normalized;
}

void split_pre_tokens(std::string_view text, std::span<const uint8_t> chars,
                      PreTokenizerPattern pattern, std::vector<std::string_view>& pieces) {
  const CharReader reader(text, chars);
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = match_at(reader, pos, pattern);
    pieces.push_back(text.substr(pos, end - pos));
    pos = end;
  }
}

void split_pre_tokens(std::string_view text, PreTokenizerPattern pattern,
                      std::vector<std::string_view>& pieces) {
  std::vector<uint8_t> chars;
  std::string unused;
  scan_characters(text, /*normalize_nfc=*/false, unused, chars);
  split_pre_tokens(text, chars, pattern, pieces);
}

}  // namespace gpufrac::engine
