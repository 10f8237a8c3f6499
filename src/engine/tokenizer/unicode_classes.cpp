#include "engine/tokenizer/unicode_classes.h"

#include <algorithm>
#include <iterator>

namespace gpufrac::engine {

uint8_t combining_class(char32_t cp) {
  if (!(unicode_flags(cp) & unicode_flag::kCombining)) return 0;
  const auto& ranges = unicode_data::kCccRanges;
  auto it =
      std::upper_bound(std::begin(ranges), std::end(ranges), uint32_t(cp),
                       [](uint32_t v, const unicode_data::CccRange& r) { return v < r.first; });
  if (it == std::begin(ranges)) return 0;
  --it;
  return cp <= it->last ? it->ccc : 0;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x110000) {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(cp - kInvalidBase));
  }
}

std::string_view python_strip(std::string_view text) {
  auto is_space = [](char32_t cp) { return unicode_flags(cp) & unicode_flag::kPythonSpace; };
  size_t begin = 0;
  while (begin < text.size()) {
    const DecodedChar c = decode_utf8(text, begin);
    if (!is_space(c.cp)) break;
    begin += c.length;
  }
  size_t end = begin;  // one past the last non-space character
  for (size_t pos = begin; pos < text.size();) {
    const DecodedChar c = decode_utf8(text, pos);
    pos += c.length;
    if (!is_space(c.cp)) end = pos;
  }
  return text.substr(begin, end - begin);
}

}  // namespace gpufrac::engine
