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
// Speed: scan_characters decodes each character once, recording its class and length, and
// normalizes to NFC on the way, so the tokenizer decodes most text once for both; the matcher then
// reads those bytes only. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpufrac::engine {

enum class PreTokenizerPattern { kQwen2, kLlama3 };

// The pattern whose regex source (as written in tokenizer.json) is `regex`, if we implement it.
std::optional<PreTokenizerPattern> pre_tokenizer_pattern_from_regex(std::string_view regex);

// Decodes each character of `text` once and writes, at the index of its first byte in `chars`,
// its CharClass (bits 0-1) and its length in bytes (bits 2-4), and at its other bytes its
// CharClass alone; entries past the text are unspecified. With `normalize_nfc`, the text is brought
// to NFC on the way: where a character fails NFC's quick check, the span between the safe
// boundaries around it is normalized into `normalized` (the rest copied), and `chars` describes
// that text. Returns the text described: `text`, or `normalized` when NFC changed something.
std::string_view scan_characters(std::string_view text, bool normalize_nfc, std::string& normalized,
                                 std::vector<uint8_t>& chars);

// Appends the pieces of `text` to `pieces` (views into `text`; together they are exactly `text`).
// `chars`: what scan_characters wrote for this text.
void split_pre_tokens(std::string_view text, std::span<const uint8_t> chars,
                      PreTokenizerPattern pattern, std::vector<std::string_view>& pieces);
// The same, scanning the text itself.
void split_pre_tokens(std::string_view text, PreTokenizerPattern pattern,
                      std::vector<std::string_view>& pieces);

}  // namespace gpufrac::engine
