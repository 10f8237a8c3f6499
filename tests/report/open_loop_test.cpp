// Open-loop tables and the SLO: which points meet it (missing numbers and failures do not),
// the largest rate meeting it, "none of the measured rates", and the table's cells.
#include "report/open_loop.h"

#include <gtest/gtest.h>

#include "report/report.h"

namespace gpufrac {
namespace {

RunPoint open_point(double rate, double ttft_p90, double itl_p50, double failed = 0) {
  RunPoint p;
  p.path = "fractions-m8/r" + std::to_string(rate) + "/summary.json";
  p.arm = "fractions";
  p.models_per_gpu = 8;
  p.gpus = 1;
  p.closed_loop = false;
  p.request_rate = rate;
  p.ttft_p50_ms = ttft_p90 / 2;
  p.ttft_p90_ms = ttft_p90;
  p.ttft_p99_ms = ttft_p90 * 1.5;
  p.itl_p50_ms = itl_p50;
  p.itl_p90_ms = itl_p50 * 1.25;
  p.request_throughput = rate * 8;
  p.output_tok_s = rate * 8 * 256;
  p.failed = failed;
  return p;
}

ArmGroup group_of(const std::vector<RunPoint>& points) {
  return group_run_points(points, {}).groups.at(0);
}

TEST(LatencySlo, BothLimitsInclusiveNoFailuresAndNothingMissing) {
  LatencySlo slo;  // defaults: TTFT p90 1000 ms, ITL p50 30 ms
  EXPECT_TRUE(slo.met_by(open_point(0.1, 1000, 30)));
  EXPECT_FALSE(slo.met_by(open_point(0.1, 1000.5, 20)));
  EXPECT_FALSE(slo.met_by(open_point(0.1, 500, 30.01)));
  EXPECT_FALSE(slo.met_by(open_point(0.1, 500, 20, /*failed=*/1)));
  RunPoint p = open_point(0.1, 500, 20);
  p.ttft_p90_ms.reset();
  EXPECT_FALSE(slo.met_by(p));
  p = open_point(0.1, 500, 20);
  p.failed.reset();
  EXPECT_FALSE(slo.met_by(p));
  EXPECT_EQ(slo.describe(), "TTFT p90 <= 1000 ms, ITL p50 <= 30 ms, no failed request");
}

TEST(LatencySlo, LargestRateMeetingIt) {
  ArmGroup g =
      group_of({open_point(0.4, 1800, 26), open_point(0.1, 640, 21.5), open_point(0.2, 900, 24)});
  LatencySlo slo;
  ASSERT_TRUE(largest_rate_meeting(g, slo));
  EXPECT_DOUBLE_EQ(*largest_rate_meeting(g, slo)->request_rate, 0.2);
  EXPECT_EQ(slo_verdict(g, slo),
            "Largest offered rate meeting the SLO (TTFT p90 <= 1000 ms, ITL p50 <= 30 ms, no "
            "failed request): 0.2 req/s per model.");
  slo.ttft_p90_ms = 2000;
  EXPECT_DOUBLE_EQ(*largest_rate_meeting(g, slo)->request_rate, 0.4);
  slo.itl_p50_ms = 10;
  EXPECT_FALSE(largest_rate_meeting(g, slo));
  EXPECT_EQ(slo_verdict(g, slo),
            "Largest offered rate meeting the SLO (TTFT p90 <= 2000 ms, ITL p50 <= 10 ms, no "
            "failed request): none of the measured rates.");
}

TEST(LatencySlo, ALowerRateThatMissesIsNamed) {
  ArmGroup g = group_of({open_point(0.1, 1200, 21), open_point(0.2, 900, 24)});
  EXPECT_NE(slo_verdict(g, LatencySlo{}).find("0.2 req/s per model (the lower rate(s) 0.1 miss"),
            std::string::npos)
      << slo_verdict(g, LatencySlo{});
}

TEST(OpenLoopTable, PercentilesAndThroughputPerOfferedRate) {
  RunPoint missing = open_point(0.5, 3000, 40, 3);
  missing.ttft_p99_ms.reset();
  missing.itl_p90_ms.reset();
  ArmGroup g = group_of({open_point(0.1, 640, 21.5), missing});
  Table t = open_loop_latency_table(g, LatencySlo{});
  EXPECT_EQ(t.id, "open-loop-fractions_m8");
  EXPECT_EQ(t.title.rfind("Open loop, fractions: 8 models per GPU on 1 GPU", 0), 0u) << t.title;
  ASSERT_EQ(t.rows.size(), 2u);
  std::vector<std::string> first, second;
  for (size_t i = 0; i < t.columns.size(); ++i) {
    first.push_back(format_cell(t.columns[i], t.rows[0][i]));
    second.push_back(format_cell(t.columns[i], t.rows[1][i]));
  }
  EXPECT_EQ(first, (std::vector<std::string>{"0.100", "320.0", "640.0", "960.0", "21.50", "26.88",
                                             "0.100", "205", "0"}));
  EXPECT_EQ(second, (std::vector<std::string>{"0.500", "1500.0", "3000.0", "—", "40.00", "—",
                                              "0.500", "1024", "3"}));
  EXPECT_NE(t.note.find("mean of the models' p90s"), std::string::npos);
  EXPECT_NE(t.footnote.find(": 0.1 req/s per model."), std::string::npos) << t.footnote;
}

TEST(OpenLoopReport, ASectionPerArmWithOpenLoopPointsAndTheSloFromTheOptions) {
  RunPoint m4 = open_point(0.1, 400, 18);
  m4.models_per_gpu = 4;
  ResultSet set = group_run_points({open_point(0.1, 640, 21.5), open_point(0.2, 1850, 26), m4}, {});
  ReportOptions options;
  std::string markdown = build_report(set, options).markdown;
  EXPECT_NE(markdown.find("## Open loop: latency vs offered rate"), std::string::npos);
  EXPECT_NE(markdown.find("### Open loop, fractions-m4: 4 models per GPU"), std::string::npos);
  EXPECT_NE(markdown.find("### Open loop, fractions-m8: 8 models per GPU"), std::string::npos);
  EXPECT_NE(markdown.find("- **fractions-m8** (8 per GPU, 8 models): Largest offered rate meeting "
                          "the SLO (TTFT p90 <= 1000 ms, ITL p50 <= 30 ms, no failed request): "
                          "0.1 req/s per model."),
            std::string::npos)
      << markdown;
  EXPECT_EQ(markdown.find("## vs reference study"), std::string::npos);  // no dedicated arm

  options.slo = {2000, 30};
  markdown = build_report(set, options).markdown;
  EXPECT_NE(markdown.find("(TTFT p90 <= 2000 ms, ITL p50 <= 30 ms, no failed request): 0.2 req/s"),
            std::string::npos)
      << markdown;
  Report report = build_report(set, options);
  bool csv = false;
  for (const Table& t : report.tables) csv = csv || t.id == "open-loop-fractions_m8";
  EXPECT_TRUE(csv);
}

}  // namespace
}  // namespace gpufrac
