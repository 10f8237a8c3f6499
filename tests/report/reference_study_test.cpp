// The reference study's numbers in code (src/report/reference_study.cpp) against the golden
// summaries (tests/data/reference-study/): every stored TTFT/ITL equals the summary's, every
// printed tok/s per GPU and node tok/s is the summary's total rounded as the study printed it,
// every printed % of baseline is the ratio of the summaries' totals, and the two copies hold the
// same runs. Expected equal-concurrency ratios are typed from the study's appendix by hand.
#include "report/reference_study.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "report/arm_groups.h"
#include "report/source_dir.h"

namespace gpufrac {
namespace {

std::string rounded(double value, int decimals) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

class ReferenceStudyTable : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    set_ = new ResultSet(group_run_points(
        find_run_points({testing::source_dir() + "/tests/data/reference-study"}), {}));
  }
  static void TearDownTestSuite() { delete set_; }
  static const ArmGroup& group(const std::string& arm) {
    for (const ArmGroup& g : set_->groups) {
      if (g.arm == arm) return g;
    }
    throw std::runtime_error("no " + arm + " group in tests/data/reference-study");
  }
  static ResultSet* set_;
};
ResultSet* ReferenceStudyTable::set_ = nullptr;

TEST_F(ReferenceStudyTable, EveryRunMatchesItsGoldenSummary) {
  const ReferenceStudy& study = reference_study();
  ASSERT_EQ(study.arms.size(), 3u);
  ASSERT_EQ(set_->groups.size(), 3u);
  for (const StudyArm& arm : study.arms) {
    const ArmGroup& g = group(arm.arm);
    EXPECT_EQ(g.models_per_gpu, arm.models_per_gpu) << arm.arm;
    EXPECT_EQ(g.gpus, study.gpus) << arm.arm;
    ASSERT_EQ(g.closed.size(), arm.runs.size()) << arm.arm;
    for (const StudyRun& run : arm.runs) {
      const RunPoint* p = g.at_concurrency(run.concurrency);
      ASSERT_TRUE(p) << arm.arm << " c" << run.concurrency;
      std::string where = arm.arm + " c" + std::to_string(run.concurrency);
      EXPECT_DOUBLE_EQ(*p->ttft_p50_ms, run.ttft_p50_ms) << where;
      EXPECT_DOUBLE_EQ(*p->itl_p50_ms, run.itl_p50_ms) << where;
      EXPECT_EQ(rounded(*p->tok_s_per_gpu(), 1), rounded(run.tok_s_per_gpu, 1)) << where;
      EXPECT_EQ(rounded(*p->output_tok_s, 0), rounded(run.node_tok_s, 0)) << where;
      EXPECT_NE(p->gpu_name.find("A100-SXM4-40GB"), std::string::npos) << where;
    }
  }
  EXPECT_NE(study.setup.find("A100-SXM4-40GB"), std::string::npos);
  EXPECT_NE(study.setup.find("vLLM"), std::string::npos);
}

TEST_F(ReferenceStudyTable, PrintedPercentOfBaselineIsTheRatioOfTheSummariesTotals) {
  const ReferenceStudy& study = reference_study();
  ASSERT_EQ(study.matched_rows.size(), 5u);
  const ArmGroup& base = group("dedicated");
  for (const StudyMatchedRow& row : study.matched_rows) {
    const RunPoint* b = base.at_requests_per_gpu(row.requests_per_gpu);
    ASSERT_TRUE(b) << row.requests_per_gpu;
    for (const std::string arm : {"timeslice", "fractions"}) {
      const RunPoint* s = group(arm).at_requests_per_gpu(row.requests_per_gpu);
      ASSERT_TRUE(s) << arm << " " << row.requests_per_gpu;
      EXPECT_EQ(rounded(100 * *s->tok_s_per_gpu() / *b->tok_s_per_gpu(), 1),
                rounded(*study.percent_of_baseline(arm, row.requests_per_gpu), 1))
          << arm << " at " << row.requests_per_gpu << " req/GPU";
    }
  }
  EXPECT_FALSE(study.percent_of_baseline("fractions", 64));
  EXPECT_FALSE(study.percent_of_baseline("dedicated", 2));
}

TEST(ReferenceStudy, EqualConcurrencyRatiosComeFromTheAppendix) {
  const ReferenceStudy& study = reference_study();
  // The study's appendix: fractions 1155/891 at c = 1 down to 8027/7434 at c = 16.
  EXPECT_EQ(rounded(*study.equal_concurrency_percent("fractions", 1), 1), "129.6");
  EXPECT_EQ(rounded(*study.equal_concurrency_percent("fractions", 16), 1), "108.0");
  EXPECT_EQ(rounded(*study.equal_concurrency_percent("fractions", 32), 1), "99.2");
  EXPECT_EQ(rounded(*study.equal_concurrency_percent("timeslice", 1), 1), "90.8");  // 809/891
  EXPECT_FALSE(study.equal_concurrency_percent("fractions", 64));
  EXPECT_THROW(study.arm("mig"), std::logic_error);
}

}  // namespace
}  // namespace gpufrac
