// Matching rules, missing data, labels and the general cost model of the report tables, on
// small hand-made result sets.
#include "report/report_tables.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "report/markdown_tables.h"
#include "report/report.h"

namespace gpufrac {
namespace {

RunPoint point(const std::string& arm, int models_per_gpu, int concurrency, double total_tok_s,
               int gpus = 8) {
  RunPoint p;
  p.path = arm + "-m" + std::to_string(models_per_gpu) + "/c" + std::to_string(concurrency) +
           "/summary.json";
  p.arm = arm;
  p.models_per_gpu = models_per_gpu;
  p.gpus = gpus;
  p.concurrency = concurrency;
  p.output_tok_s = total_tok_s;
  p.ttft_p50_ms = 10.0 * concurrency;
  p.itl_p50_ms = 1.0 + concurrency;
  return p;
}

std::vector<std::string> formatted_row(const Table& t, size_t row) {
  std::vector<std::string> cells;
  for (size_t i = 0; i < t.columns.size(); ++i)
    cells.push_back(format_cell(t.columns[i], t.rows[row][i]));
  return cells;
}

TEST(Matching, SharedAtCMeetsDedicatedAtModelsPerGpuTimesC) {
  ResultSet set = group_run_points({point("dedicated", 1, 1, 800), point("dedicated", 1, 2, 1600),
                                    point("dedicated", 1, 4, 2400), point("fractions", 2, 1, 1200),
                                    point("fractions", 2, 2, 2000)},
                                   {});
  std::vector<Table> tables = throughput_tables(set);
  ASSERT_EQ(tables.size(), 1u);
  const Table& t = tables[0];
  ASSERT_EQ(t.rows.size(), 2u);  // 2 and 4 req/GPU; dedicated c1 has no partner
  EXPECT_EQ(formatted_row(t, 0),
            (std::vector<std::string>{"2", "2", "1", "200.0", "150.0", "75.0%"}));
  EXPECT_EQ(formatted_row(t, 1),
            (std::vector<std::string>{"4", "4", "2", "300.0", "250.0", "83.3%"}));
  EXPECT_NE(t.footnote.find("dedicated c1 (1 req/GPU)"), std::string::npos) << t.footnote;
}

TEST(Matching, AnArmMissingAtAMatchedRowPrintsADash) {
  ResultSet set = group_run_points({point("dedicated", 1, 2, 1600), point("dedicated", 1, 4, 2400),
                                    point("timeslice", 2, 1, 1000), point("fractions", 2, 1, 1200),
                                    point("fractions", 2, 2, 2000)},
                                   {});
  const Table t = throughput_tables(set).at(0);
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(formatted_row(t, 1),
            (std::vector<std::string>{"4", "4", "2", "300.0", "—", "250.0", "—", "83.3%"}));
  const Table latency = latency_tables(set).at(0);
  std::vector<std::string> row = formatted_row(latency, 1);
  EXPECT_EQ(row[latency.columns.size() - 4], "—");      // TTFT timeslice %
  EXPECT_EQ(row[latency.columns.size() - 3], "50.0%");  // TTFT fractions c2 20 / dedicated c4 40
  EXPECT_EQ(row[latency.columns.size() - 1], "60.0%");  // ITL 3 / 5
}

TEST(Matching, EachModelsPerGpuValueGetsItsOwnTable) {
  ResultSet set =
      group_run_points({point("dedicated", 1, 4, 1600), point("dedicated", 1, 8, 2400),
                        point("fractions", 2, 2, 1200), point("fractions", 4, 2, 2000, 2)},
                       {});
  std::vector<Table> tables = throughput_tables(set);
  ASSERT_EQ(tables.size(), 2u);
  EXPECT_EQ(tables[0].id, "throughput-m2");
  EXPECT_EQ(tables[1].id, "throughput-m4");
  // fractions m4 on 2 GPUs at c2: 8 req/GPU, 1000 tok/s per GPU vs dedicated c8: 300.
  EXPECT_EQ(formatted_row(tables[1], 0),
            (std::vector<std::string>{"8", "8", "2", "300.0", "1000.0", "333.3%"}));
  EXPECT_EQ(tables[1].columns[4].title, "fractions-m4");
  EXPECT_EQ(tables[1].columns[4].key, "fractions_m4_tok_s_per_gpu");
}

TEST(Matching, WithoutADedicatedArmThereIsNothingToMatch) {
  ResultSet set = group_run_points({point("fractions", 2, 1, 1200)}, {});
  EXPECT_TRUE(throughput_tables(set).empty());
  EXPECT_TRUE(latency_tables(set).empty());
  std::string markdown = build_report(set, {}).markdown;
  EXPECT_NE(markdown.find("No dedicated arm with closed-loop points"), std::string::npos);
  // Cost and appendix still list the shared arm.
  Table cost = cost_table(set, 16, CostModel{});
  EXPECT_EQ(formatted_row(cost, 0), (std::vector<std::string>{"1", "1200", "0.2315"}));
}

// A CPU-like result: a model alone on the device at c=1 makes 100 tok/s; on half of it, 40.
std::vector<RunPoint> fractions_trail_at_c1() {
  return {point("dedicated", 1, 1, 100, 1), point("dedicated", 1, 2, 180, 1),
          point("dedicated", 1, 4, 250, 1), point("timeslice", 2, 1, 110, 1),
          point("timeslice", 2, 2, 200, 1), point("fractions", 2, 1, 80, 1),
          point("fractions", 2, 2, 210, 1)};
}

TEST(FractionsTrailNote, NamesTheTrailingRowsWithWhatAShareKept) {
  const Table t = throughput_tables(group_run_points(fractions_trail_at_c1(), {})).at(0);
  size_t at = t.footnote.find("Why fractions trail timeslice at 2 req/GPU:");
  ASSERT_NE(at, std::string::npos) << t.footnote;
  std::string why = t.footnote.substr(at, t.footnote.find("\n\n", at) - at);  // its paragraph
  EXPECT_EQ(why.find('\n'), std::string::npos) << "one line";
  // E = 80 / 2 / 100; 2 x E; S = 110 / 100. Row 4 req/GPU (210 > 200) is not named.
  EXPECT_NE(why.find("a model made 40% of its tok/s alone"), std::string::npos) << why;
  EXPECT_NE(why.find("2 on shares made 80% of one alone, and 2 taking turns 110%"),
            std::string::npos)
      << why;
  EXPECT_EQ(why.find("4 req/GPU"), std::string::npos) << why;
  // The footnote keeps what it said before: dedicated c1 has no partner.
  EXPECT_NE(t.footnote.find("dedicated c1 (1 req/GPU)"), std::string::npos) << t.footnote;
}

TEST(FractionsTrailNote, NothingWhereFractionsLeadEveryRow) {
  std::vector<RunPoint> points = fractions_trail_at_c1();
  points[5].output_tok_s = 120;  // fractions c1 now beat timeslice c1 (110)
  const Table t = throughput_tables(group_run_points(points, {})).at(0);
  EXPECT_EQ(t.footnote.find("Why"), std::string::npos) << t.footnote;
  EXPECT_EQ(t.footnote.find("trail"), std::string::npos) << t.footnote;
}

TEST(CpuAnalogueNote, OneLineUnderTablesOfCpuRunsOnly) {
  std::vector<RunPoint> points = fractions_trail_at_c1();  // no machine.gpu: a CPU run
  const Table cpu = throughput_tables(group_run_points(points, {})).at(0);
  size_t at = cpu.footnote.find("CPU run: the arms share the CPU's cores");
  ASSERT_NE(at, std::string::npos) << cpu.footnote;
  EXPECT_EQ(cpu.footnote.find('\n', at), std::string::npos) << "one line, the last";
  EXPECT_NE(cpu.footnote.find("do not predict a GPU's"), std::string::npos) << cpu.footnote;
  for (RunPoint& p : points) p.gpu_name = "NVIDIA H200";
  const Table gpu = throughput_tables(group_run_points(points, {})).at(0);
  EXPECT_EQ(gpu.footnote.find("CPU run"), std::string::npos) << gpu.footnote;
}

TEST(FractionsTrailNote, ARowWithoutDedicatedAtTheSameCIsNamedWithoutNumbers) {
  std::vector<RunPoint> points = fractions_trail_at_c1();
  points.erase(points.begin());  // dedicated c1: row 2 req/GPU still matches dedicated c2
  const Table t = throughput_tables(group_run_points(points, {})).at(0);
  EXPECT_NE(t.footnote.find("fractions trail timeslice at 2 req/GPU, where dedicated has no point "
                            "at the same c per model to say why."),
            std::string::npos)
      << t.footnote;
  EXPECT_EQ(t.footnote.find("Why"), std::string::npos) << t.footnote;
}

TEST(Grouping, TwoPointsAtOneConcurrencyAreAUsageErrorNamingBoth) {
  RunPoint a = point("fractions", 2, 4, 100), b = point("fractions", 2, 4, 110);
  a.path = "run1/summary.json";
  b.path = "run2/summary.json";
  try {
    group_run_points({a, b}, {});
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("run1/summary.json and run2/summary.json"),
              std::string::npos)
        << e.what();
  }
}

TEST(Grouping, TwoDedicatedArmsAreAUsageError) {
  EXPECT_THROW(
      group_run_points({point("dedicated", 1, 1, 100), point("dedicated", 1, 1, 100, 1)}, {}),
      UsageError);
}

TEST(Grouping, LabelsRenameArmsButNotKeys) {
  ResultSet set =
      group_run_points({point("timeslice", 2, 1, 100)}, parse_arm_labels({"timeslice=HAMi"}));
  EXPECT_EQ(set.groups[0].label, "HAMi");
  EXPECT_EQ(set.groups[0].key, "timeslice_m2");
  EXPECT_THROW(parse_arm_labels({"mig=MIG"}), UsageError);
  EXPECT_THROW(parse_arm_labels({"timeslice"}), UsageError);
}

TEST(Grouping, GpuCountJoinsTheLabelOnlyWhereOneArmRanOnSeveral) {
  ResultSet set = group_run_points({point("dedicated", 1, 1, 100), point("fractions", 2, 1, 100),
                                    point("fractions", 2, 1, 20, 1)},
                                   {});
  ASSERT_EQ(set.groups.size(), 3u);
  EXPECT_EQ(set.groups[0].label, "dedicated");
  EXPECT_EQ(set.groups[1].label, "fractions (1 GPU)");
  EXPECT_EQ(set.groups[1].key, "fractions_m2_g1");
  EXPECT_EQ(set.groups[2].label, "fractions (8 GPUs)");
}

TEST(Cost, NodesAreWholeAndTokensScaleToTheModelsServed) {
  CostModel cost{2.0, 8};
  EXPECT_EQ(cost.nodes_needed(16, 1), 2);
  EXPECT_EQ(cost.nodes_needed(16, 2), 1);
  EXPECT_EQ(cost.nodes_needed(17, 2), 2);
  EXPECT_EQ(cost.nodes_needed(24, 1), 3);
  EXPECT_EQ(cost.nodes_needed(3, 4), 1);
  EXPECT_DOUBLE_EQ(CostModel::tok_s_for(24, 1000, 8), 3000);
  EXPECT_DOUBLE_EQ(*cost.cost_per_million_tokens(3, 3000.0), 2.0 * 3 / (3000 * 3600.0) * 1e6);
  EXPECT_FALSE(cost.cost_per_million_tokens(1, 0.0));
  EXPECT_FALSE(cost.cost_per_million_tokens(1, std::nullopt));
}

TEST(Cost, TableForTwentyFourModelsWithAMissingPoint) {
  ResultSet set =
      group_run_points({point("dedicated", 1, 1, 800), point("dedicated", 1, 2, 1600),
                        point("fractions", 2, 1, 1200), point("fractions", 4, 2, 1000, 2)},
                       {});
  Table t = cost_table(set, 24, CostModel{1.0, 8});
  EXPECT_EQ(t.columns[1].title, "dedicated tok/s (3 nodes)");     // 24 / 8
  EXPECT_EQ(t.columns[3].title, "fractions-m2 tok/s (2 nodes)");  // 24 / 16 -> 2
  EXPECT_EQ(t.columns[6].title, "fractions-m4 tok/s (1 node)");
  EXPECT_EQ(t.columns[5].title, "fractions-m2 change");
  ASSERT_EQ(t.rows.size(), 2u);
  // c1: dedicated 800 x 24/8 = 2400 tok/s on 3 nodes; fractions-m2 1200 x 24/16 = 1800 on 2.
  EXPECT_EQ(formatted_row(t, 0), (std::vector<std::string>{"1", "2400", "0.3472", "1800", "0.3086",
                                                           "-11.1%", "—", "—", "—"}));
  // c2: fractions-m2 has no point; fractions-m4 (8 models) 1000 x 24/8 = 3000 on 1 node.
  EXPECT_EQ(formatted_row(t, 1), (std::vector<std::string>{"2", "4800", "0.1736", "—", "—", "—",
                                                           "3000", "0.0926", "-46.7%"}));
}

TEST(Appendix, UnionOfConcurrenciesWithDashes) {
  ResultSet set =
      group_run_points({point("dedicated", 1, 1, 800), point("fractions", 2, 2, 1200)}, {});
  Table t = appendix_table(set);
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(formatted_row(t, 0), (std::vector<std::string>{"1", "800", "—"}));
  EXPECT_EQ(formatted_row(t, 1), (std::vector<std::string>{"2", "—", "1200"}));
  EXPECT_EQ(t.columns[2].title, "fractions (16 models)");
}

TEST(PerArmRows, MissingMetricsPrintAsDashes) {
  RunPoint p = point("fractions", 2, 4, 1000);
  p.itl_p50_ms.reset();
  p.completed = 160;
  p.failed = 0;
  ResultSet set = group_run_points({p}, {});
  Table t = closed_loop_rows_table(set.groups[0]);
  EXPECT_EQ(formatted_row(t, 0), (std::vector<std::string>{"4", "8", "40.0", "—", "125.0", "1000",
                                                           "—", "—", "160", "0"}));
}

TEST(Report, OpenLoopPointsGetTheirOwnTableAndStayOutOfTheMatchedOnes) {
  RunPoint open = point("fractions", 2, 1, 500);
  open.closed_loop = false;
  open.concurrency.reset();
  open.request_rate = 0.5;
  ResultSet set = group_run_points({point("dedicated", 1, 2, 1600), open}, {});
  Report report = build_report(set, {});
  auto tables = testing::parse_markdown_tables(report.markdown);
  const auto& t = testing::table_starting_with(
      tables, "fractions: 2 models per GPU on 8 GPUs, 16 models, open loop");
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(t.rows[0][0], "0.50");
  EXPECT_EQ(t.rows[0][1], "—");
  EXPECT_NE(report.markdown.find("No shared arm with closed-loop points"), std::string::npos);
}

}  // namespace
}  // namespace gpufrac
