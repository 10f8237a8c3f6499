// AdmissionLimit on a given clock: the in-flight ceiling, the token bucket (burst of max(1, rate),
// refill at the rate, Retry-After rounded up), and that a refused request takes nothing.
#include "node/admission_limit.h"

#include <gtest/gtest.h>

namespace gpufrac {
namespace {

using Verdict = AdmissionLimit::Verdict;
constexpr int64_t kSecond = 1'000'000'000;

TEST(AdmissionLimit, NoLimitsAdmitsEverythingAndCountsIt) {
  AdmissionLimit limit(0, 0);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(limit.admit(0).verdict, Verdict::kAdmitted);
  EXPECT_EQ(limit.in_flight(), 1000);
  limit.release();
  EXPECT_EQ(limit.in_flight(), 999);
}

TEST(AdmissionLimit, InFlightCeilingFreesASlotPerRelease) {
  AdmissionLimit limit(2, 0);
  EXPECT_EQ(limit.admit(0).verdict, Verdict::kAdmitted);
  EXPECT_EQ(limit.admit(0).verdict, Verdict::kAdmitted);
  AdmissionLimit::Decision refused = limit.admit(0);
  EXPECT_EQ(refused.verdict, Verdict::kTooManyInFlight);
  EXPECT_EQ(refused.retry_after_s, 1);
  EXPECT_EQ(limit.in_flight(), 2);
  limit.release();
  EXPECT_EQ(limit.admit(0).verdict, Verdict::kAdmitted);
  EXPECT_EQ(limit.admit(0).verdict, Verdict::kTooManyInFlight);
}

TEST(AdmissionLimit, TokenBucketBurstsOneSecondsWorthThenRefillsAtTheRate) {
  AdmissionLimit limit(0, 4);
  int64_t t = 100 * kSecond;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(limit.admit(t).verdict, Verdict::kAdmitted) << i;
  AdmissionLimit::Decision refused = limit.admit(t);
  EXPECT_EQ(refused.verdict, Verdict::kTooFast);
  EXPECT_EQ(refused.retry_after_s, 1);  // 0.25 s, rounded up to a whole second
  EXPECT_EQ(limit.admit(t + kSecond / 4 - 1000).verdict, Verdict::kTooFast);
  EXPECT_EQ(limit.admit(t + kSecond / 4 + 1000).verdict, Verdict::kAdmitted);
  // A long pause refills up to the burst, not beyond.
  int64_t later = t + 60 * kSecond;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(limit.admit(later).verdict, Verdict::kAdmitted);
  EXPECT_EQ(limit.admit(later).verdict, Verdict::kTooFast);
}

TEST(AdmissionLimit, SlowRatesWaitWholeSecondsAndRefusalsTakeNoToken) {
  AdmissionLimit limit(1, 0.25);  // one request every 4 s, one at a time
  EXPECT_EQ(limit.admit(0).verdict, Verdict::kAdmitted);
  // Over the in-flight ceiling: refused before the bucket is looked at.
  EXPECT_EQ(limit.admit(kSecond).verdict, Verdict::kTooManyInFlight);
  limit.release();
  AdmissionLimit::Decision refused = limit.admit(kSecond);
  EXPECT_EQ(refused.verdict, Verdict::kTooFast);
  EXPECT_EQ(refused.retry_after_s, 3);
  EXPECT_EQ(limit.in_flight(), 0);  // a refused request holds no slot
  EXPECT_EQ(limit.admit(4 * kSecond).verdict, Verdict::kAdmitted);
}

}  // namespace
}  // namespace gpufrac
