// Statistics against numpy: expected values are numpy.percentile / mean / std (numpy 1.24,
// default "linear" method, ddof=0), each also worked out by hand in the comments.
#include "bench/stats.h"

#include <gtest/gtest.h>

namespace gpufrac {
namespace {

TEST(Stats, FourValuesMatchNumpy) {
  Stats s = compute_stats({4, 1, 3, 2});
  // rank = q/100 * (n - 1) = 0.03 q; p1 -> 1 + 0.03, p50 -> rank 1.5 -> 2.5, p99 -> 3 + 0.97.
  const double expected[] = {1.03, 1.15, 1.3, 1.75, 2.5, 3.25, 3.7, 3.85, 3.97};
  for (size_t i = 0; i < kReportedPercentiles.size(); ++i) {
    EXPECT_NEAR(s.percentiles[i], expected[i], 1e-12) << "p" << kReportedPercentiles[i];
  }
  EXPECT_EQ(s.count, 4u);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 4);
  EXPECT_NEAR(s.std, 1.118033988749895, 1e-15);  // sqrt(1.25): population std, ddof = 0
}

TEST(Stats, UnevenValuesMatchNumpy) {
  // sorted: 0.5 3 7.25 8 12.5 42 100; rank = q/100 * 6.
  Stats s = compute_stats({12.5, 3.0, 7.25, 100.0, 0.5, 42.0, 8.0});
  EXPECT_NEAR(s.percentile(1), 0.65, 1e-12);    // rank 0.06: 0.5 + 0.06 * 2.5
  EXPECT_NEAR(s.percentile(5), 1.25, 1e-12);    // rank 0.3:  0.5 + 0.3 * 2.5
  EXPECT_NEAR(s.percentile(10), 2.0, 1e-12);    // rank 0.6:  0.5 + 0.6 * 2.5
  EXPECT_NEAR(s.percentile(25), 5.125, 1e-12);  // rank 1.5:  3 + 0.5 * 4.25
  EXPECT_NEAR(s.percentile(50), 8.0, 1e-12);    // rank 3
  EXPECT_NEAR(s.percentile(75), 27.25, 1e-12);  // rank 4.5:  12.5 + 0.5 * 29.5
  EXPECT_NEAR(s.percentile(90), 65.2, 1e-12);   // rank 5.4:  42 + 0.4 * 58
  EXPECT_NEAR(s.percentile(95), 82.6, 1e-12);   // rank 5.7:  42 + 0.7 * 58
  EXPECT_NEAR(s.percentile(99), 96.52, 1e-12);  // rank 5.94: 42 + 0.94 * 58
  EXPECT_DOUBLE_EQ(s.mean, 24.75);              // 173.25 / 7
  EXPECT_NEAR(s.std, 33.29119360174056, 1e-12);
}

TEST(Stats, SingleValueIsEveryPercentile) {
  Stats s = compute_stats({7});
  for (double p : s.percentiles) EXPECT_EQ(p, 7);
  EXPECT_EQ(s.std, 0);
}

TEST(Stats, PercentileEndsAreExact) {
  std::vector<double> sorted = {0.1, 0.2, 0.3};
  EXPECT_EQ(percentile_of_sorted(sorted, 0), 0.1);
  EXPECT_EQ(percentile_of_sorted(sorted, 100), 0.3);
  EXPECT_NEAR(percentile_of_sorted(sorted, 40), 0.18, 1e-15);  // rank 0.8
}

TEST(Stats, EmptySampleWritesNulls) {
  Stats s = compute_stats({});
  Json j = stats_to_json(s);
  EXPECT_EQ(j["count"], 0);
  EXPECT_TRUE(j["p50"].is_null());
  EXPECT_TRUE(j["mean"].is_null());
}

TEST(Stats, JsonCarriesEveryField) {
  Json j = stats_to_json(compute_stats({1, 2}));
  for (const char* key : {"count", "mean", "min", "max", "std", "p1", "p5", "p10", "p25", "p50",
                          "p75", "p90", "p95", "p99"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_DOUBLE_EQ(j["p50"].get<double>(), 1.5);
}

TEST(Stats, OnlyReportedPercentilesCanBeAsked) {
  EXPECT_THROW(compute_stats({1}).percentile(42), std::out_of_range);
}

}  // namespace
}  // namespace gpufrac
