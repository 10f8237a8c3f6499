#include "engine/tokenizer/pre_tokenizer.h"

#include <array>

#include "engine/tokenizer/unicode_classes.h"

namespace gpufrac::engine {
namespace {

constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Char {
  char32_t cp;
  uint32_t length;
  CharClass cls;
};

// Reads characters of one text; an ASCII fast path keeps the common case to a table lookup.
class CharReader {
 public:
  explicit CharReader(std::string_view text) : text_(text) {}

  size_t size() const { return text_.size(); }

  // Precondition: pos < size().
  Char at(size_t pos) const {
    const unsigned char b = static_cast<unsigned char>(text_[pos]);
    if (b < 0x80) return {b, 1, ascii_class(b)};
    const DecodedChar c = decode_utf8(text_, pos);
    return {c.cp, c.length, char_class(c.cp)};
  }

  CharClass class_at(size_t pos) const { return pos < text_.size() ? at(pos).cls : CharClass(255); }

  // End of the run of characters of class `cls` starting at pos.
  size_t run_end(size_t pos, CharClass cls) const {
    while (pos < text_.size()) {
      const Char c = at(pos);
      if (c.cls != cls) break;
      pos += c.length;
    }
    return pos;
  }

  size_t newline_run_end(size_t pos) const {
    while (pos < text_.size() && (text_[pos] == '\r' || text_[pos] == '\n')) ++pos;
    return pos;
  }

  char byte(size_t pos) const { return pos < text_.size() ? text_[pos] : '\0'; }

 private:
  static CharClass ascii_class(unsigned char b) {
    static constexpr auto kTable = [] {
      std::array<CharClass, 128> t{};
      for (int i = 0; i < 128; ++i) t[i] = char_class(char32_t(i));
      return t;
    }();
    return kTable[b];
  }

  std::string_view text_;
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
  const Char c = r.at(pos);
  const size_t next = pos + c.length;
  if (c.cp == '\'') {
    if (const size_t end = match_contraction(r, pos)) return end;
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c.cls == CharClass::kLetter) return r.run_end(next, CharClass::kLetter);
  if (c.cls != CharClass::kNumber && c.cp != '\r' && c.cp != '\n' &&
      r.class_at(next) == CharClass::kLetter) {
    return r.run_end(next, CharClass::kLetter);
  }
  // \p{N} or \p{N}{1,3}
  if (c.cls == CharClass::kNumber) {
    if (pattern == PreTokenizerPattern::kQwen2) return next;
    size_t end = next;
    for (int i = 1; i < 3 && end < r.size(); ++i) {
      const Char d = r.at(end);
      if (d.cls != CharClass::kNumber) break;
      end += d.length;
    }
    return end;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  if (c.cls == CharClass::kOther) {
    return r.newline_run_end(r.run_end(next, CharClass::kOther));
  }
  if (c.cp == ' ' && r.class_at(next) == CharClass::kOther) {
    return r.newline_run_end(r.run_end(next, CharClass::kOther));
  }
  // c is whitespace: \s*[\r\n]+ | \s+(?!\S) | \s+
  size_t end = pos;
  size_t last_char_start = pos;
  size_t after_last_newline = 0;
  while (end < r.size()) {
    const Char d = r.at(end);
    if (d.cls != CharClass::kWhitespace) break;
    last_char_start = end;
    end += d.length;
    if (d.cp == '\r' || d.cp == '\n') after_last_newline = end;
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

void split_pre_tokens(std::string_view text, PreTokenizerPattern pattern,
                      std::vector<std::string_view>& pieces) {
  const CharReader reader(text);
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = match_at(reader, pos, pattern);
    pieces.push_back(text.substr(pos, end - pos));
    pos = end;
  }
}

}  // namespace gpufrac::engine
