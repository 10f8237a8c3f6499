// The "vs reference study" section on small hand-made result sets: when it appears, our numbers
// beside the study's row by row, "—" for rows and arms we did not run, and the note naming both
// setups.
#include "report/study_comparison.h"

#include <gtest/gtest.h>

namespace gpufrac {
namespace {

RunPoint point(const std::string& arm, int models_per_gpu, int concurrency, double total_tok_s,
               int gpus = 1) {
  RunPoint p;
  p.path = arm + "-m" + std::to_string(models_per_gpu) + "-g" + std::to_string(gpus) + "/c" +
           std::to_string(concurrency) + "/summary.json";
  p.arm = arm;
  p.models_per_gpu = models_per_gpu;
  p.gpus = gpus;
  p.concurrency = concurrency;
  p.output_tok_s = total_tok_s;
  p.ttft_p50_ms = 10.0 * concurrency + models_per_gpu;
  p.itl_p50_ms = 1.0 + concurrency + models_per_gpu;
  p.gpu_name = "NVIDIA H200";
  return p;
}

std::vector<std::string> formatted_row(const Table& t, size_t row) {
  std::vector<std::string> cells;
  for (size_t i = 0; i < t.columns.size(); ++i)
    cells.push_back(format_cell(t.columns[i], t.rows[row][i]));
  return cells;
}

std::vector<std::string> titles(const Table& t) {
  std::vector<std::string> out;
  for (const Column& c : t.columns) out.push_back(c.title);
  return out;
}

TEST(StudyComparison, NeedsADedicatedArmAndASharedArmAtTwoModelsPerGpu) {
  EXPECT_TRUE(compare_with_reference_study(group_run_points({point("fractions", 2, 1, 300)}, {}))
                  .tables.empty());
  EXPECT_TRUE(
      compare_with_reference_study(
          group_run_points({point("dedicated", 1, 2, 400), point("fractions", 4, 1, 300)}, {}))
          .tables.empty());
  RunPoint open = point("fractions", 2, 1, 300);
  open.closed_loop = false;
  open.concurrency.reset();
  open.request_rate = 0.5;
  EXPECT_TRUE(
      compare_with_reference_study(group_run_points({point("dedicated", 1, 2, 400), open}, {}))
          .tables.empty());
  EXPECT_EQ(
      compare_with_reference_study(
          group_run_points({point("dedicated", 1, 2, 400), point("timeslice", 2, 1, 200)}, {}))
          .tables.size(),
      3u);
}

TEST(StudyComparison, PercentOfBaselineBesideTheStudysRowByRow) {
  ResultSet set = group_run_points(
      {point("dedicated", 1, 2, 400), point("dedicated", 1, 4, 800), point("fractions", 2, 1, 300),
       point("fractions", 2, 2, 480), point("fractions", 4, 1, 200)},
      {{"dedicated", "baseline"}});
  StudyComparison c = compare_with_reference_study(set);
  ASSERT_EQ(c.tables.size(), 3u);
  const Table& t = c.tables[0];
  EXPECT_EQ(t.id, "vs-study-throughput");
  // No timeslice arm: its columns stay, ours all "—".
  EXPECT_EQ(titles(t), (std::vector<std::string>{"req/GPU", "timeslice %", "study HAMi %",
                                                 "fractions-m2 %", "study fractions %"}));
  ASSERT_EQ(t.rows.size(), 5u);  // the study's rows: 2, 4, 8, 16, 32 req/GPU
  EXPECT_EQ(formatted_row(t, 0), (std::vector<std::string>{"2", "—", "44.5%", "75.0%", "63.5%"}));
  EXPECT_EQ(formatted_row(t, 1), (std::vector<std::string>{"4", "—", "45.0%", "60.0%", "60.4%"}));
  EXPECT_EQ(formatted_row(t, 4), (std::vector<std::string>{"32", "—", "72.8%", "—", "87.9%"}));
  EXPECT_NE(t.note.find("HAMi-equivalent"), std::string::npos);
}

TEST(StudyComparison, LatencyPerArmBesideTheStudys) {
  ResultSet set = group_run_points(
      {point("dedicated", 1, 2, 400), point("fractions", 2, 1, 300), point("timeslice", 2, 1, 250)},
      {{"timeslice", "HAMi-like"}});
  const Table t = compare_with_reference_study(set).tables.at(1);
  EXPECT_EQ(t.id, "vs-study-latency");
  EXPECT_EQ(titles(t), (std::vector<std::string>{
                           "req/GPU", "TTFT dedicated", "study TTFT baseline", "TTFT HAMi-like",
                           "study TTFT HAMi", "TTFT fractions", "study TTFT fractions",
                           "ITL dedicated", "study ITL baseline", "ITL HAMi-like", "study ITL HAMi",
                           "ITL fractions", "study ITL fractions"}));
  // Ours: TTFT = 10c + m, ITL = 1 + c + m; the study's row of 2 req/GPU.
  EXPECT_EQ(formatted_row(t, 0),
            (std::vector<std::string>{"2", "21.0", "48.6", "12.0", "216.0", "12.0", "185.0", "4.00",
                                      "8.61", "4.00", "19.00", "4.00", "13.20"}));
  EXPECT_EQ(formatted_row(t, 2)[1], "—");
  EXPECT_EQ(formatted_row(t, 2)[2], "331.5");
}

TEST(StudyComparison, EqualConcurrencyRatioBesideTheStudysAppendix) {
  ResultSet set = group_run_points({point("dedicated", 1, 1, 200), point("dedicated", 1, 16, 1000),
                                    point("fractions", 2, 1, 250), point("fractions", 2, 16, 990)},
                                   {});
  const Table t = compare_with_reference_study(set).tables.at(2);
  EXPECT_EQ(t.id, "vs-study-equal-concurrency");
  ASSERT_EQ(t.rows.size(), 6u);  // c = 1..32
  EXPECT_EQ(formatted_row(t, 0), (std::vector<std::string>{"1", "—", "90.8%", "125.0%", "129.6%"}));
  EXPECT_EQ(formatted_row(t, 1), (std::vector<std::string>{"2", "—", "84.8%", "—", "114.0%"}));
  EXPECT_EQ(formatted_row(t, 4), (std::vector<std::string>{"16", "—", "89.5%", "99.0%", "108.0%"}));
}

TEST(StudyComparison, OneColumnPerGroupAtTwoModelsPerGpu) {
  ResultSet set = group_run_points({point("dedicated", 1, 2, 400), point("fractions", 2, 1, 300),
                                    point("fractions", 2, 1, 2000, 8)},
                                   {});
  const Table t = compare_with_reference_study(set).tables.at(0);
  // The study's column once per arm, after our groups of that arm (CSV keys stay unique).
  EXPECT_EQ(titles(t), (std::vector<std::string>{"req/GPU", "timeslice %", "study HAMi %",
                                                 "fractions (1 GPU) %", "fractions (8 GPUs) %",
                                                 "study fractions %"}));
  EXPECT_EQ(formatted_row(t, 0),
            (std::vector<std::string>{"2", "—", "44.5%", "75.0%", "62.5%", "63.5%"}));
  std::string csv_header = render_csv(t).substr(0, render_csv(t).find('\n'));
  EXPECT_EQ(csv_header,
            "requests_per_gpu,timeslice_m2_pct_of_dedicated,study_timeslice_pct_of_baseline,"
            "fractions_m2_g1_pct_of_dedicated,fractions_m2_g8_pct_of_dedicated,"
            "study_fractions_pct_of_baseline");
}

TEST(StudyComparison, NoteNamesBothSetups) {
  std::vector<RunPoint> points = {point("dedicated", 1, 2, 400), point("fractions", 2, 1, 300)};
  std::string note = compare_with_reference_study(group_run_points(points, {})).note;
  EXPECT_NE(note.find("8x A100-SXM4-40GB"), std::string::npos) << note;
  EXPECT_NE(note.find("vLLM"), std::string::npos) << note;
  EXPECT_NE(note.find("NVIDIA H200 (machine.gpu"), std::string::npos) << note;
  for (RunPoint& p : points) p.gpu_name.clear();
  note = compare_with_reference_study(group_run_points(points, {})).note;
  EXPECT_NE(note.find("do not name (no machine.gpu)"), std::string::npos) << note;
}

}  // namespace
}  // namespace gpufrac
