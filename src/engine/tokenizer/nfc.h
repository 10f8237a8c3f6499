// Unicode Normalization Form C (canonical decomposition, canonical ordering, canonical
// composition), the "NFC" normalizer of tokenizer.json (Qwen2/Qwen3 use it). Tables come from
// python3's unicodedata (see gen_unicode_tables.py for the version); the algorithm is UAX #15's.
//
// Contract: input is UTF-8; bytes that are not well-formed UTF-8 pass through unchanged and act
// as starters that compose with nothing. Pure functions, thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace gpufrac::engine {

// True when `text` is certainly in NFC (NFC_Quick_Check: every character Yes and combining
// classes in canonical order). False means "maybe not": call nfc_normalize.
bool nfc_quick_check(std::string_view text);

// NFC of `text`.
std::string nfc_normalize(std::string_view text);

// For normalizing on the way through a text (the tokenizer's scan_characters): a "safe boundary"
// is a character for which is_nfc_safe_boundary (unicode_classes.h) holds, or the text's end;
// NFC changes nothing across one.
// The first safe boundary after the character at `pos`.
size_t nfc_span_end(std::string_view text, size_t pos);
// Appends NFC(span) to `out`; `span` runs from a safe boundary (or the text's start) to the next
// safe boundary after its first character (nfc_span_end).
void append_nfc_span(std::string_view span, std::string& out);

}  // namespace gpufrac::engine
