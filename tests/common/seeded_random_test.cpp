// The seeded generator's outputs are pinned: preset weights, sampled tokens and bench workloads
// all derive from them, so a change here must fail a test. The reference values are SplitMix64's
// published first outputs for state 0 (Vigna's splitmix64.c) and FNV-1a's for "a".
#include "common/seeded_random.h"

#include <gtest/gtest.h>

#include "common/run_label.h"

namespace gpufrac {
namespace {

TEST(SeededRandom, SplitMix64StreamMatchesTheReferenceOutputs) {
  EXPECT_EQ(splitmix64_nth(0, 1), 0xe220a8397b1dcdafull);
  EXPECT_EQ(splitmix64_nth(0, 2), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(splitmix64_nth(0, 3), 0x06c45d188009454full);
  EXPECT_EQ(splitmix64(0), splitmix64_nth(0, 1));
  // Output n of the stream at s is output 1 of the stream at s + (n - 1) * gamma.
  EXPECT_EQ(splitmix64_nth(12345, 7), splitmix64(12345 + 6 * kSplitMixGamma));
}

TEST(SeededRandom, MixSeedIsOrderedAndFnv1aMatchesTheReference) {
  EXPECT_EQ(mix_seed(1, 2), splitmix64(1 ^ splitmix64(2)));
  EXPECT_NE(mix_seed(1, 2), mix_seed(2, 1));
  EXPECT_EQ(fnv1a(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a("a"), 0xaf63dc4c8601ec8cull);
  static_assert(splitmix64(0) == 0xe220a8397b1dcdafull, "usable in constant expressions");
}

TEST(RunLabel, NamesAnArmAtAPacking) {
  EXPECT_EQ(run_label("fractions", 2), "fractions-m2");
  EXPECT_EQ(models_per_gpu_suffix(16), "-m16");
  EXPECT_EQ(run_key("timeslice", 4), "timeslice_m4");
}

}  // namespace
}  // namespace gpufrac
