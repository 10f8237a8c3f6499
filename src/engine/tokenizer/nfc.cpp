#include "engine/tokenizer/nfc.h"

#include <algorithm>
#include <iterator>
#include <vector>

#include "engine/tokenizer/unicode_classes.h"

namespace gpufrac::engine {
namespace {

// Hangul syllables are composed and decomposed arithmetically (Unicode ch. 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr char32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

struct CodePoint {
  char32_t cp;
  uint8_t ccc;
};

void append_decomposed(char32_t cp, std::vector<CodePoint>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out.push_back({kLBase + s / kNCount, 0});
    out.push_back({kVBase + (s % kNCount) / kTCount, 0});
    if (s % kTCount != 0) out.push_back({kTBase + s % kTCount, 0});
    return;
  }
  const auto& table = unicode_data::kDecompositions;
  auto it =
      std::lower_bound(std::begin(table), std::end(table), uint32_t(cp),
                       [](const unicode_data::Decomposition& d, uint32_t v) { return d.cp < v; });
  if (it != std::end(table) && it->cp == cp) {
    for (uint32_t i = 0; i < it->length; ++i) {
      const char32_t part = unicode_data::kDecompositionPool[it->offset + i];
      out.push_back({part, combining_class(part)});
    }
    return;
  }
  out.push_back({cp, combining_class(cp)});
}

// The primary composite of (first, second), or 0 when they do not compose.
char32_t compose_pair(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase &&
      second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
      second > kTBase && second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  const auto& table = unicode_data::kCompositions;
  auto it =
      std::lower_bound(std::begin(table), std::end(table), std::pair{first, second},
                       [](const unicode_data::Composition& c, std::pair<char32_t, char32_t> v) {
                         return c.first < v.first || (c.first == v.first && c.second < v.second);
                       });
  if (it != std::end(table) && it->first == first && it->second == second) return it->composite;
  return 0;
}

}  // namespace

void append_nfc_span(std::string_view text, std::string& out) {
  thread_local std::vector<CodePoint> chars;  // reused: a span per failing character
  chars.clear();
  for (size_t pos = 0; pos < text.size();) {
    const DecodedChar c = decode_utf8(text, pos);
    pos += c.length;
    append_decomposed(c.cp, chars);
  }
  // Canonical ordering: a stable sort of every run of non-starters by combining class.
  for (size_t i = 0; i < chars.size();) {
    if (chars[i].ccc == 0) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < chars.size() && chars[end].ccc != 0) ++end;
    std::stable_sort(chars.begin() + i, chars.begin() + end,
                     [](const CodePoint& a, const CodePoint& b) { return a.ccc < b.ccc; });
    i = end;
  }
  // Canonical composition: each character composes with the last starter unless blocked (a
  // character between them has combining class 0 or >= its own).
  size_t kept = 0;            // chars[0, kept) is the composed prefix
  size_t starter = SIZE_MAX;  // index in the composed prefix of the last starter
  int last_ccc = -1;          // class of the last kept char after the starter; -1: none yet
  for (size_t i = 0; i < chars.size(); ++i) {
    const CodePoint c = chars[i];
    if (starter != SIZE_MAX && (last_ccc == -1 || last_ccc < c.ccc)) {
      if (const char32_t composite = compose_pair(chars[starter].cp, c.cp)) {
        chars[starter].cp = composite;
        continue;
      }
    }
    if (c.ccc == 0) {
      starter = kept;
      last_ccc = -1;
    } else {
      last_ccc = c.ccc;
    }
    chars[kept++] = c;
  }
  for (size_t i = 0; i < kept; ++i) append_utf8(out, chars[i].cp);
}

size_t nfc_span_end(std::string_view text, size_t pos) {
  pos += decode_utf8(text, pos).length;
  while (pos < text.size()) {
    const DecodedChar c = decode_utf8(text, pos);
    if (is_nfc_safe_boundary(unicode_flags(c.cp))) break;
    pos += c.length;
  }
  return pos;
}

bool nfc_quick_check(std::string_view text) {
  NfcQuickCheck check;
  for (size_t pos = 0; pos < text.size() && check.passed();) {
    const DecodedChar c = decode_utf8(text, pos);
    pos += c.length;
    check.add(c.cp, unicode_flags(c.cp));
  }
  return check.passed();
}

// Span by span between safe boundaries: NFC changes nothing across one. The plain form of what
// the tokenizer's scan_characters does on the way (which normalizes only the spans the quick
// check rejects); the tests hold the two equal.
std::string nfc_normalize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = nfc_span_end(text, pos);
    append_nfc_span(text.substr(pos, end - pos), out);
    pos = end;
  }
  return out;
}

}  // namespace gpufrac::engine
