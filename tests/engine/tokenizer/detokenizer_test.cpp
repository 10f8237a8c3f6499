// Property tests of StreamingDetokenizer on the real Qwen3 vocabulary: fed one id at a time, the
// deltas are always whole, well-formed characters, nothing is emitted twice, and together they
// are exactly decode(ids).
#include "engine/tokenizer/detokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "engine/tokenizer/utf8.h"
#include "tokenizer_test_support.h"

namespace gpufrac::engine {
namespace {

using Ids = std::vector<int32_t>;

bool is_well_formed(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Step step = utf8_step(s, pos);
    if (step.status != Utf8Status::kValid) return false;
    pos += step.length;
  }
  return true;
}

// Streams `ids`, checking every delta; returns the concatenation.
std::string stream(const Tokenizer& t, const Ids& ids, bool skip_special) {
  StreamingDetokenizer d(t, skip_special);
  std::string all;
  for (const int32_t id : ids) {
    const std::string delta = d.feed(id);
    EXPECT_TRUE(is_well_formed(delta)) << "delta is not whole UTF-8 characters";
    EXPECT_LE(d.pending_bytes(), 3u);
    all += delta;
  }
  const std::string rest = d.finish();
  EXPECT_TRUE(is_well_formed(rest));
  return all + rest;
}

TEST(StreamingDetokenizer, HoldsBytesOfACharacterSplitAcrossTokens) {
  const Tokenizer& t = test_util::qwen3();
  const std::string text = "\U0001FAE0 \u9f98";  // melting face, a rare CJK character
  const Ids ids = t.encode(text);
  ASSERT_GT(ids.size(), 3u) << "expected these characters to be split across byte tokens";
  StreamingDetokenizer d(t);
  const std::string first = d.feed(ids[0]);
  EXPECT_EQ(first, "");  // the first token is only part of the emoji
  EXPECT_GT(d.pending_bytes(), 0u);
  std::string all = first;
  for (size_t i = 1; i < ids.size(); ++i) all += d.feed(ids[i]);
  EXPECT_EQ(all + d.finish(), text);
}

TEST(StreamingDetokenizer, EqualsDecodeOnRandomText) {
  const Tokenizer& t = test_util::qwen3();
  const std::vector<std::string> pool = {
      "a",  "Z",          " ",       "\n", "  ",          "é",  "ß",          "ж",
      "世", "界",         "\u9f98",  "😀",  "👩‍💻", "🇩🇪", "\U0001FAE0", "ก",
      "्",   "<|im_end|>", "<think>", "12", "'s",          "\t"};
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    std::string text;
    const int n = 1 + rng() % 30;
    for (int i = 0; i < n; ++i) text += pool[rng() % pool.size()];
    const Ids ids = t.encode(text);
    EXPECT_EQ(stream(t, ids, false), t.decode(ids, false)) << text;
    EXPECT_EQ(stream(t, ids, true), t.decode(ids, true)) << text;
    EXPECT_EQ(stream(t, ids, false), text);
  }
}

TEST(StreamingDetokenizer, EqualsDecodeOnRandomIds) {
  // Random ids (as a random-weight model samples them) make arbitrary byte soup, special tokens
  // and ids past the vocabulary: deltas must stay well formed and add up to decode().
  const Tokenizer& t = test_util::qwen3();
  std::mt19937 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    Ids ids(1 + rng() % 40);
    for (int32_t& id : ids) {
      const uint32_t pick = rng() % 10;
      id = pick < 6   ? int32_t(rng() % 256)           // byte-ish tokens, often partial UTF-8
           : pick < 9 ? int32_t(rng() % 151936)        // anything the model can sample
                      : int32_t(151643 + rng() % 26);  // added tokens
    }
    EXPECT_EQ(stream(t, ids, true), t.decode(ids, true));
    EXPECT_EQ(stream(t, ids, false), t.decode(ids, false));
  }
}

TEST(StreamingDetokenizer, SkipsOrIncludesSpecialTokens) {
  const Tokenizer& t = test_util::qwen3();
  const Ids ids = t.encode("hi<|im_end|>");
  EXPECT_EQ(stream(t, ids, true), "hi");
  EXPECT_EQ(stream(t, ids, false), "hi<|im_end|>");
}

TEST(StreamingDetokenizer, UnfinishedCharacterAtTheEndBecomesOneReplacement) {
  const Tokenizer& t = test_util::qwen3();
  const Ids ids = t.encode("\U0001FAE0");
  ASSERT_GT(ids.size(), 1u);
  StreamingDetokenizer d(t);
  EXPECT_EQ(d.feed(ids[0]), "");
  EXPECT_EQ(d.finish(), "\ufffd");
}

}  // namespace
}  // namespace gpufrac::engine
