// The report's plots as data: a line per arm in the all-arms plots, and the per-arm latency plot
// with closed- and open-loop ITL p50/p90 lines (only those with points).
#include "report/report_plots.h"

#include <gtest/gtest.h>

namespace gpufrac {
namespace {

RunPoint point(const std::string& arm, int concurrency, double tok_s, double itl_p50) {
  RunPoint p;
  p.path = arm + "/c" + std::to_string(concurrency) + "/summary.json";
  p.arm = arm;
  p.models_per_gpu = arm == "dedicated" ? 1 : 2;
  p.concurrency = concurrency;
  p.output_tok_s = tok_s;
  p.itl_p50_ms = itl_p50;
  return p;
}

std::vector<std::string> names(const Plot& plot) {
  std::vector<std::string> out;
  for (const PlotSeries& s : plot.series) out.push_back(s.name);
  return out;
}

TEST(ReportPlots, AllArmPlotsHaveALinePerArm) {
  ResultSet set = group_run_points({point("dedicated", 1, 100, 8), point("dedicated", 2, 180, 9),
                                    point("fractions", 1, 150, 12)},
                                   {{"dedicated", "baseline"}});
  EXPECT_EQ(names(throughput_plot(set)), (std::vector<std::string>{"baseline", "fractions"}));
  Plot latency = latency_plot(set);
  EXPECT_EQ(names(latency), (std::vector<std::string>{"baseline", "fractions"}));
  EXPECT_EQ(latency.series[0].points, (std::vector<std::pair<double, double>>{{100, 8}, {180, 9}}));
  EXPECT_EQ(throughput_plot(set).series[1].points,
            (std::vector<std::pair<double, double>>{{2, 150}}));  // 2 req/GPU
}

TEST(ReportPlots, PerArmPlotHasClosedAndOpenLoopItlLines) {
  RunPoint c1 = point("fractions", 1, 150, 12);
  c1.itl_p90_ms = 15;
  RunPoint c2 = point("fractions", 2, 260, 14);  // no p90: left out of the p90 line
  RunPoint open = point("fractions", 1, 40, 10);
  open.closed_loop = false;
  open.concurrency.reset();
  open.request_rate = 0.1;
  ArmGroup g = group_run_points({c1, c2, open}, {}).groups.at(0);
  Plot plot = arm_latency_plot(g);
  EXPECT_EQ(names(plot), (std::vector<std::string>{"ITL p50, closed loop", "ITL p90, closed loop",
                                                   "ITL p50, open loop"}));
  EXPECT_EQ(plot.series[0].points, (std::vector<std::pair<double, double>>{{150, 12}, {260, 14}}));
  EXPECT_EQ(plot.series[1].points, (std::vector<std::pair<double, double>>{{150, 15}}));
  EXPECT_EQ(plot.series[2].points, (std::vector<std::pair<double, double>>{{40, 10}}));
  EXPECT_NE(plot.title.find("fractions"), std::string::npos);
  EXPECT_EQ(arm_latency_plot_file(g), "itl-vs-tok-s-per-gpu-fractions_m2.svg");
}

}  // namespace
}  // namespace gpufrac
