// Unit tests of StopStringMatcher: stops across chunk boundaries, hold-back of possible prefixes,
// and a property test: any split of the text gives the same output as a simple whole-text scan.
#include "engine/tokenizer/stop_matcher.h"

#include <gtest/gtest.h>

#include <random>

namespace gpufrac::engine {
namespace {

TEST(StopStringMatcher, HoldsAPossiblePrefixAndStopsAcrossChunks) {
  StopStringMatcher m({"STOP"});
  auto r = m.feed("abc ST");
  EXPECT_EQ(r.text, "abc ");
  EXPECT_FALSE(r.stopped);
  r = m.feed("O");
  EXPECT_EQ(r.text, "");
  r = m.feed("P and more");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
  EXPECT_TRUE(m.stopped());
  EXPECT_TRUE(m.feed("later").stopped);
  EXPECT_EQ(m.feed("later").text, "");
  EXPECT_EQ(m.finish(), "");
}

TEST(StopStringMatcher, ReleasesAFalseStart) {
  StopStringMatcher m({"STOP"});
  EXPECT_EQ(m.feed("xST").text, "x");
  EXPECT_EQ(m.feed("OX").text, "STOX");
  EXPECT_EQ(m.feed("S").text, "");
  EXPECT_EQ(m.finish(), "S");
}

TEST(StopStringMatcher, TextBeforeTheStopInTheSameChunkIsReleased) {
  StopStringMatcher m({"\n\n", "END"});
  const auto r = m.feed("line one\nline two\n\nline three");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop_index, 0u);
  EXPECT_EQ(r.text, "line one\nline two");
}

TEST(StopStringMatcher, FirstToCompleteWinsAndIndexIsTheCallersIndex) {
  StopStringMatcher m({"", "abcd", "bc"});
  const auto r = m.feed("xabcd");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop_index, 2u);  // "bc" completes before "abcd"
  EXPECT_EQ(r.text, "xa");
}

TEST(StopStringMatcher, MultiByteStops) {
  StopStringMatcher m({"世界"});
  EXPECT_EQ(m.feed("你好世").text, "你好");
  const auto r = m.feed("界!");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
}

TEST(StopStringMatcher, NoStopsPassesEverythingThrough) {
  StopStringMatcher m({});
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.feed("anything").text, "anything");
  EXPECT_EQ(m.finish(), "");
}

// The reference: scan the whole text once; the stop that ends first wins (ties: earliest start).
std::pair<std::string, bool> reference(const std::string& text,
                                       const std::vector<std::string>& stops) {
  size_t best_end = std::string::npos, best_start = 0;
  for (const std::string& s : stops) {
    const size_t start = text.find(s);
    if (start == std::string::npos) continue;
    const size_t end = start + s.size();
    if (end < best_end || (end == best_end && start < best_start)) {
      best_end = end;
      best_start = start;
    }
  }
  if (best_end == std::string::npos) return {text, false};
  return {text.substr(0, best_start), true};
}

TEST(StopStringMatcher, AnySplitMatchesTheWholeTextScan) {
  std::mt19937 rng(3);
  const std::string alphabet = "ab ";
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text;
    for (int i = 0, n = rng() % 40; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    std::vector<std::string> stops;
    for (int s = 0, n = 1 + rng() % 3; s < n; ++s) {
      std::string stop;
      for (int i = 0, len = 1 + rng() % 4; i < len; ++i) stop += alphabet[rng() % alphabet.size()];
      stops.push_back(stop);
    }
    StopStringMatcher m(stops);
    std::string out;
    bool stopped = false;
    for (size_t pos = 0; pos < text.size() && !stopped;) {
      const size_t len = std::min<size_t>(text.size() - pos, rng() % 6);
      const auto r = m.feed(text.substr(pos, len));
      out += r.text;
      stopped = r.stopped;
      pos += len;
    }
    if (!stopped) out += m.finish();
    const auto [expected, expected_stop] = reference(text, stops);
    ASSERT_EQ(out, expected) << "text '" << text << "'";
    ASSERT_EQ(stopped, expected_stop) << "text '" << text << "'";
  }
}

}  // namespace
}  // namespace gpufrac::engine
