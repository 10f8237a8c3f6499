#include "engine/tokenizer/utf8.h"

namespace gpufrac::engine {

Utf8Step utf8_step(std::string_view bytes, size_t pos) {
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const unsigned char lead = s[pos];
  if (lead < 0x80) return {Utf8Status::kValid, 1};
  uint32_t need;                          // continuation bytes after the lead
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the first continuation byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 2;
    if (lead == 0xE0) low = 0xA0;   // no overlongs
    if (lead == 0xED) high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 3;
    if (lead == 0xF0) low = 0x90;   // no overlongs
    if (lead == 0xF4) high = 0x8F;  // nothing above U+10FFFF
  } else {
    return {Utf8Status::kInvalid, 1};
  }
  uint32_t length = 1;
  for (uint32_t i = 0; i < need; ++i, ++length) {
    if (pos + length >= bytes.size()) return {Utf8Status::kTruncated, length};
    const unsigned char b = s[pos + length];
    const unsigned char lo = i == 0 ? low : 0x80, hi = i == 0 ? high : 0xBF;
    if (b < lo || b > hi) return {Utf8Status::kInvalid, length};
  }
  return {Utf8Status::kValid, length};
}

void append_lossy_utf8(std::string_view bytes, std::string& out) {
  size_t pos = 0;
  size_t clean_start = 0;  // start of the run of valid bytes not yet copied
  while (pos < bytes.size()) {
    const Utf8Step step = utf8_step(bytes, pos);
    if (step.status == Utf8Status::kValid) {
      pos += step.length;
      continue;
    }
    out.append(bytes.substr(clean_start, pos - clean_start));
    out.append(kReplacementChar);
    pos += step.length;
    clean_start = pos;
  }
  out.append(bytes.substr(clean_start));
}

}  // namespace gpufrac::engine
