// Unit tests of the tokenizer's text primitives: the pre-tokenizer matchers, Unicode classes,
// UTF-8 validation, NFC and the ByteLevel alphabet.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/nfc.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/unicode_classes.h"
#include "engine/tokenizer/utf8.h"

namespace gpufrac::engine {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(std::string_view text, PreTokenizerPattern pattern = PreTokenizerPattern::kQwen2) {
  std::vector<std::string_view> views;
  split_pre_tokens(text, pattern, views);
  return Pieces(views.begin(), views.end());
}

TEST(PreTokenizer, WordsTakeTheirLeadingSpaceOrPunctuation) {
  EXPECT_EQ(split("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("(hello)"), (Pieces{"(hello", ")"}));
  EXPECT_EQ(split("\ttab"), (Pieces{"\ttab"}));
  EXPECT_EQ(split("a\u3000b"), (Pieces{"a", "\u3000b"}));
  EXPECT_EQ(split("x\u00a0y"), (Pieces{"x", "\u00a0y"}));
  EXPECT_EQ(split("こんにちは世界"), (Pieces{"こんにちは世界"}));
  // Combining marks are not letters: they break letter runs.
  EXPECT_EQ(split("नमस्ते"), (Pieces{"नमस", "्त", "े"}));
}

TEST(PreTokenizer, ContractionsAreCaseInsensitive) {
  EXPECT_EQ(split("I'm here, they'RE ok"),
            (Pieces{"I", "'m", " here", ",", " they", "'RE", " ok"}));
  EXPECT_EQ(split("don'tx"), (Pieces{"don", "'t", "x"}));
  EXPECT_EQ(split("'llama"), (Pieces{"'ll", "ama"}));
  EXPECT_EQ(split("'x"), (Pieces{"'x"}));
  // Oniguruma's (?i) folds U+017F (long s) to 's' (JavaScript's [sS] does not).
  EXPECT_EQ(split("'\u017ft"), (Pieces{"'\u017f", "t"}));
}

TEST(PreTokenizer, DigitsAreSingleForQwenAndTriplesForLlama3) {
  EXPECT_EQ(split("12345 abc"), (Pieces{"1", "2", "3", "4", "5", " abc"}));
  EXPECT_EQ(split("12345 abc", PreTokenizerPattern::kLlama3), (Pieces{"123", "45", " abc"}));
  EXPECT_EQ(split("$100.00", PreTokenizerPattern::kLlama3), (Pieces{"$", "100", ".", "00"}));
  EXPECT_EQ(split("٣٤٥٦", PreTokenizerPattern::kLlama3), (Pieces{"٣٤٥", "٦"}));
  EXPECT_EQ(split("½²"), (Pieces{"½", "²"}));  // \p{N} includes No
}

TEST(PreTokenizer, WhitespaceRuns) {
  EXPECT_EQ(split("  \n\n  x"), (Pieces{"  \n\n", " ", " x"}));
  EXPECT_EQ(split("a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(split("a \tb"), (Pieces{"a", " ", "\tb"}));
  EXPECT_EQ(split("x   "), (Pieces{"x", "   "}));
  EXPECT_EQ(split("a\r\nb"), (Pieces{"a", "\r\n", "b"}));
  EXPECT_EQ(split("\n \n  y"), (Pieces{"\n \n", " ", " y"}));
  EXPECT_EQ(split(" !!! "), (Pieces{" !!!", " "}));
  EXPECT_EQ(split("\"quoted\"...\n\n"), (Pieces{"\"quoted", "\"...\n\n"}));
  EXPECT_EQ(split("😀😀 hi"), (Pieces{"😀😀", " hi"}));
}

TEST(PreTokenizer, WhitespaceIsUnicodeWhiteSpaceAsInOniguruma) {
  // U+0085 is White_Space (JavaScript's \s says no); U+FEFF is not (JavaScript's \s says yes).
  EXPECT_EQ(split("a\u0085\u0085b"), (Pieces{"a", "\u0085", "\u0085b"}));
  EXPECT_EQ(split("a\ufeff\ufeffb"), (Pieces{"a", "\ufeff\ufeff", "b"}));
}

TEST(PreTokenizer, InvalidUtf8IsOtherAndCoversEveryByte) {
  const std::string text = "ab\xff\xfe cd\xc3";
  EXPECT_EQ(split(text), (Pieces{"ab", "\xff\xfe", " cd", "\xc3"}));
}

TEST(PreTokenizer, KnowsOnlyTheTwoPatterns) {
  EXPECT_FALSE(pre_tokenizer_pattern_from_regex("\\s+"));
  EXPECT_EQ(
      pre_tokenizer_pattern_from_regex(
          R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"),
      PreTokenizerPattern::kLlama3);
}

TEST(UnicodeClasses, Categories) {
  EXPECT_EQ(char_class(U'a'), CharClass::kLetter);
  EXPECT_EQ(char_class(U'\u4e16'), CharClass::kLetter);
  EXPECT_EQ(char_class(U'\u02b0'), CharClass::kLetter);  // Lm
  EXPECT_EQ(char_class(U'7'), CharClass::kNumber);
  EXPECT_EQ(char_class(U'\u2167'), CharClass::kNumber);  // Nl (roman numeral eight)
  EXPECT_EQ(char_class(U'\u0301'), CharClass::kOther);   // Mn
  EXPECT_EQ(char_class(U'\U0001F600'), CharClass::kOther);
  EXPECT_EQ(char_class(U'\u2029'), CharClass::kWhitespace);
  EXPECT_EQ(char_class(U'\u200b'), CharClass::kOther);  // zero width space is Cf, not White_Space
  EXPECT_EQ(combining_class(U'\u0301'), 230);
  EXPECT_EQ(combining_class(U'\u0323'), 220);
  EXPECT_EQ(combining_class(U'a'), 0);
}

TEST(UnicodeClasses, DecodeUtf8RejectsIllFormedBytesOneAtATime) {
  EXPECT_EQ(decode_utf8("\xe2\x82\xac", 0).cp, U'\u20ac');
  EXPECT_EQ(decode_utf8("\xed\xa0\x80", 0).cp, kInvalidBase + 0xED);  // surrogate
  EXPECT_EQ(decode_utf8("\xc0\xaf", 0).cp, kInvalidBase + 0xC0);      // overlong
  EXPECT_EQ(decode_utf8("\xf0\x9f\x98", 0).length, 1u);               // truncated
  std::string out;
  append_utf8(out, kInvalidBase + 0xFF);
  EXPECT_EQ(out, "\xff");
}

TEST(UnicodeClasses, PythonStrip) {
  EXPECT_EQ(python_strip(" \t\n hi there \u3000\u0085\x1c"), "hi there");
  EXPECT_EQ(python_strip("\u200bx\u200b"), "\u200bx\u200b");  // not whitespace in Python
  EXPECT_EQ(python_strip("   "), "");
}

std::string lossy(std::string_view bytes) {
  std::string out;
  append_lossy_utf8(bytes, out);
  return out;
}

TEST(Utf8, LossyReplacesEachMaximalSubpartOnce) {
  EXPECT_EQ(lossy("ok"), "ok");
  EXPECT_EQ(lossy("a\xe2\x82"
                  "b"),
            "a\ufffd"
            "b");                                // truncated 3-byte sequence: one U+FFFD
  EXPECT_EQ(lossy("\x80\x80"), "\ufffd\ufffd");  // stray continuation bytes: one each
  EXPECT_EQ(lossy("\xf0\x9f\x98\x80"), "😀");
  EXPECT_EQ(lossy("\xf0\x9f\x98"), "\ufffd");  // cut off at the end
  EXPECT_EQ(lossy("\xed\xa0\x80"),
            "\ufffd\ufffd\ufffd");  // surrogate: E0 A0 is not allowed after ED
  EXPECT_EQ(lossy("\xf4\x90\x80\x80"), "\ufffd\ufffd\ufffd\ufffd");  // above U+10FFFF
}

TEST(Utf8, StepReportsTruncation) {
  EXPECT_EQ(utf8_step("\xf0\x9f", 0).status, Utf8Status::kTruncated);
  EXPECT_EQ(utf8_step("\xf0\x9f", 0).length, 2u);
  EXPECT_EQ(utf8_step("\xf0\x41", 0).status, Utf8Status::kInvalid);
  EXPECT_EQ(utf8_step("\xc3\xa9", 0).status, Utf8Status::kValid);
}

TEST(Nfc, ComposesReordersAndMapsSingletons) {
  EXPECT_EQ(nfc_normalize("e\u0301"), "\u00e9");
  EXPECT_EQ(nfc_normalize("a\u0302\u0323"), "\u1ead");  // reordered to a + dot below + circumflex
  EXPECT_EQ(nfc_normalize("\u1100\u1161\u11a8"), "\uac01");  // Hangul L V T
  EXPECT_EQ(nfc_normalize("\uac00\u11a8"), "\uac01");        // Hangul LV + T
  EXPECT_EQ(nfc_normalize("\u2126"), "\u03a9");              // ohm sign -> omega (singleton)
  EXPECT_EQ(nfc_normalize("\u0958"), "\u0915\u093c");        // composition exclusion stays apart
  EXPECT_EQ(nfc_normalize("\u0b47\u0b3e"), "\u0b4b");        // two starters compose
  EXPECT_EQ(nfc_normalize("\u0301e"), "\u0301e");            // a leading mark composes with nothing
  EXPECT_EQ(nfc_normalize("a\xff\u0301"), "a\xff\u0301");    // an invalid byte blocks composition
}

TEST(Nfc, QuickCheck) {
  EXPECT_TRUE(nfc_quick_check("plain ascii"));
  EXPECT_TRUE(nfc_quick_check("d\u00e9j\u00e0 vu \u4f60\u597d \U0001F600"));
  EXPECT_TRUE(
      nfc_quick_check("x\u0316\u0350"));  // marks in order (220, 230) that compose with nothing
  EXPECT_FALSE(nfc_quick_check("x\u0350\u0316"));  // 220 after 230: out of canonical order
  EXPECT_FALSE(nfc_quick_check("e\u0301"));        // U+0301 can compose: Maybe
  EXPECT_FALSE(nfc_quick_check("\u2126"));         // No
}

// The tokenizer's one pass: scan_characters' text is NFC(text), and its bytes give every
// character's class and length (and continuation bytes the class), on random mixes of ASCII,
// precomposed and decomposed Latin, marks out of canonical order, jamo, singletons, CJK, emoji
// and invalid bytes, so that spans to normalize fall next to each other and at both ends.
TEST(PreTokenizer, ScanNormalizesToNfcAndClassesEveryByte) {
  const std::vector<std::string> parts = {"a",
                                          " ",
                                          "Hello ",
                                          "\u00e9",
                                          "e\u0301",
                                          "x\u0350\u0316",
                                          "\u0316",
                                          "\u1100\u1161",
                                          "\u11a8",
                                          "\uac00",
                                          "\u2126",
                                          "\u0958",
                                          "\u4f60\u597d",
                                          "\U0001F600",
                                          "\xff",
                                          "\xe2\x82",
                                          "\u0915\u093c",
                                          "7",
                                          "\n",
                                          "12345678"};
  std::mt19937 rng(7);
  std::vector<uint8_t> chars;
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    for (int n = int(rng() % 12); n > 0; --n) text += parts[rng() % parts.size()];
    std::string normalized;
    const std::string_view scanned = scan_characters(text, true, normalized, chars);
    ASSERT_EQ(std::string(scanned), nfc_normalize(text)) << text;
    ASSERT_GE(chars.size(), scanned.size());
    for (size_t pos = 0; pos < scanned.size();) {
      const DecodedChar c = decode_utf8(scanned, pos);
      const uint8_t cls = uint8_t(char_class(c.cp));
      ASSERT_EQ(chars[pos], cls | c.length << 2) << text << " at " << pos;
      for (size_t i = 1; i < c.length; ++i) ASSERT_EQ(chars[pos + i], cls) << text;
      pos += c.length;
    }
  }
}

TEST(ByteLevel, RoundTripsEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(char(b));
  const std::string spelled = bytes_to_byte_level(all);
  EXPECT_EQ(byte_level_to_bytes(spelled), all);
  EXPECT_EQ(bytes_to_byte_level(" hello\n"), "\u0120hello\u010a");
  EXPECT_FALSE(byte_level_to_bytes("\u4e16"));
}

}  // namespace
}  // namespace gpufrac::engine
