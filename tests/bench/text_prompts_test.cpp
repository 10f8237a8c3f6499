// ExactTextBuilder and build_exact_texts against in-process token counters: texts come out exact
// for tokenizers near and far from one token per word, with the filler chosen by calibration,
// seeded and distinct, in parallel; what cannot be built fails with a line naming the fix.
#include "bench/text_prompts.h"

#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <set>
#include <sstream>

#include "common/error.h"

namespace gpufrac {
namespace {

std::vector<std::string> words_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// A request's tokens: `overhead` + per word `tokens_of(word)`; counts its calls.
class ToyCounter : public TokenCounter {
 public:
  ToyCounter(int overhead, std::function<int(const std::string&)> tokens_of)
      : overhead_(overhead), tokens_of_(std::move(tokens_of)) {}
  int count(const std::string& text) const override {
    ++calls;
    int tokens = overhead_;
    for (const std::string& w : words_of(text)) tokens += tokens_of_(w);
    return tokens;
  }
  std::string source() const override { return "POST toy/tokenize"; }
  mutable std::atomic<int64_t> calls{0};

 private:
  int overhead_;
  std::function<int(const std::string&)> tokens_of_;
};

int one_per_word(const std::string&) {
  return 1;
}
// Longer words split: ceil(length / 3) tokens (like a small vocabulary).
int by_length(const std::string& w) {
  return int(w.size() + 2) / 3;
}

TEST(ExactText, OneTokenPerWordTakesOneCountPerPrompt) {
  ToyCounter counter(9, one_per_word);
  ExactTextBuilder builder(counter);
  EXPECT_EQ(builder.filler(), " the");
  EXPECT_EQ(builder.shortest(), 10);
  int64_t before = counter.calls;
  for (int n : {10, 11, 50, 2048}) EXPECT_EQ(counter.count(builder.build(n, uint64_t(n))), n);
  EXPECT_EQ(counter.calls - before, 4 + 4);  // one count to build each, one here to check
}

TEST(ExactText, ExactForEveryLengthWhenWordsSplit) {
  ToyCounter counter(8, by_length);
  ExactTextBuilder builder(counter);
  for (int n = builder.shortest(); n < 400; ++n) {
    ASSERT_EQ(counter.count(builder.build(n, uint64_t(n) * 7)), n) << n;
  }
  int64_t before = counter.calls;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    EXPECT_EQ(counter.count(builder.build(4096, seed)), 4096);
  }
  // Search and fill stay cheap even at 4,096 tokens: about log2 of the length per prompt.
  EXPECT_LT((counter.calls - before) / 20.0, 14);
}

TEST(ExactText, CalibrationSkipsFillersThatAreNotOneToken) {
  // " the" is two tokens here; " a" is one.
  ToyCounter counter(3, [](const std::string& w) { return w == "the" ? 2 : by_length(w); });
  ExactTextBuilder builder(counter);
  EXPECT_EQ(builder.filler(), " a");
  for (int n = builder.shortest(); n < 120; ++n) {
    std::string text = builder.build(n, 5);
    EXPECT_EQ(counter.count(text), n) << text;
  }
}

TEST(ExactText, NoOneTokenFillerIsAClearError) {
  ToyCounter counter(3, [](const std::string& w) { return w.size() < 4 ? 2 : 1; });
  try {
    ExactTextBuilder builder(counter);
    FAIL() << "no filler counts as one token";
  } catch (const RuntimeFailure& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("POST toy/tokenize counts none of ' the'"), std::string::npos)
        << message;
    EXPECT_NE(message.find("--prompt ids"), std::string::npos) << message;
  }
}

TEST(ExactText, BelowTheShortestPromptIsAClearError) {
  ToyCounter counter(9, one_per_word);
  ExactTextBuilder builder(counter);
  try {
    builder.build(9, 1);
    FAIL() << "9 tokens leave no room for text after a 9-token template";
  } catch (const RuntimeFailure& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("shortest one POST toy/tokenize allows (10 tokens"), std::string::npos)
        << message;
    EXPECT_NE(message.find("raise --isl"), std::string::npos) << message;
  }
}

TEST(ExactText, SeededAndDistinctFromTheFirstWords) {
  ToyCounter counter(3, by_length);
  ExactTextBuilder builder(counter);
  EXPECT_EQ(builder.build(200, 42), builder.build(200, 42));
  std::set<std::string> heads;
  for (uint64_t seed = 0; seed < 500; ++seed) {
    std::vector<std::string> words = words_of(builder.build(200, seed));
    ASSERT_GE(words.size(), 13u);
    heads.insert(std::accumulate(words.begin(), words.begin() + 6, std::string()));
  }
  EXPECT_EQ(heads.size(), 500u);  // even the first 6 words differ
}

TEST(ExactTexts, ParallelBuildKeepsOrderAndReportsProgress) {
  ToyCounter counter(8, by_length);
  std::vector<TextPromptSpec> specs;
  for (int i = 0; i < 64; ++i) specs.push_back({20 + 7 * i, uint64_t(i)});
  std::vector<std::pair<int64_t, int64_t>> progress;
  std::vector<std::string> texts = build_exact_texts(
      counter, specs, 8, [&](int64_t done, int64_t total) { progress.emplace_back(done, total); },
      0.001);
  ASSERT_EQ(texts.size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) EXPECT_EQ(counter.count(texts[i]), specs[i].tokens);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back(), std::make_pair(int64_t(64), int64_t(64)));
}

TEST(ExactTexts, FirstFailureEndsTheBuild) {
  ToyCounter counter(8, one_per_word);
  std::vector<TextPromptSpec> specs(40, {30, 1});
  specs[17].tokens = 2;  // below the template
  EXPECT_THROW(build_exact_texts(counter, specs, 4), RuntimeFailure);
}

TEST(ExactTexts, AThrowingProgressCallbackStopsTheWorkers) {
  ToyCounter counter(8, by_length);
  std::vector<TextPromptSpec> specs(2000, {3000, 1});
  struct Cancelled {};
  EXPECT_THROW(build_exact_texts(
                   counter, specs, 2, [](int64_t, int64_t) { throw Cancelled(); }, 0.001),
               Cancelled);
  int64_t calls = counter.calls;
  EXPECT_LT(calls, 2000);  // stopped long before the end
}

}  // namespace
}  // namespace gpufrac
