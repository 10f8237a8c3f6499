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

}  // namespace gpufrac::engine
