// The pre-tokenizer: splits text into the pieces that BPE encodes one at a time. Instead of a
// regex engine, each supported tokenizer.json Split pattern has a hand-written matcher that gives
// exactly the leftmost-first matches of that regex ("Isolated" behaviour: the pieces cover the
// text, in order):
//
//   kQwen2  (Qwen2, Qwen2.5, Qwen3)
//     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//     \s*[\r\n]+|\s+(?!\S)|\s+
//   kLlama3 (Llama 3, 3.1, 3.2, 3.3): the same with \p{N}{1,3} in place of \p{N}
//
// Character classes follow Oniguruma, the regex engine of Hugging Face tokenizers: \p{L} and \p{N}
// are the general categories, \s is Unicode White_Space (includes U+0085, not U+FEFF), and (?i)
// lets U+017F (long s) match 's'. Bytes that are not valid UTF-8 count as "other" characters.
//
// Speed: scan_characters decodes each character once, recording its class and length, and runs
// NFC's quick check on the way, so the tokenizer decodes the text once for both; the matcher then
// reads those bytes only. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace gpufrac::engine {

enum class PreTokenizerPattern { kQwen2, kLlama3 };

// The pattern whose regex source (as written in tokenizer.json) is `regex`, if we implement it.
std::optional<PreTokenizerPattern> pre_tokenizer_pattern_from_regex(std::string_view regex);

// Resizes `chars` to text.size() + 3 and writes, at the index of each character's first byte from
// `from` on, its CharClass (bits 0-1) and its length in bytes (bits 2-4), and at its other bytes
// its CharClass alone; entries past the text are unspecified. With `check_nfc`, stops at the first
// character that fails NFC's quick check and returns the last NFC-safe boundary before it (nfc.h;
// unicode_classes.h): text before it is in NFC and stays as it is, the rest must be normalized and
// scanned again. Otherwise, and when the whole text passes, returns text.size().
size_t scan_characters(std::string_view text, size_t from, bool check_nfc,
                       std::vector<uint8_t>& chars);

// Appends the pieces of `text` to `pieces` (views into `text`; together they are exactly `text`).
// `chars`: what scan_characters wrote for this text.
void split_pre_tokens(std::string_view text, std::span<const uint8_t> chars,
                      PreTokenizerPattern pattern, std::vector<std::string_view>& pieces);
// The same, scanning the text itself.
void split_pre_tokens(std::string_view text, PreTokenizerPattern pattern,
                      std::vector<std::string_view>& pieces);

}  // namespace gpufrac::engine
