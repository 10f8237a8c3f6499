// Golden test: `gpufrac report` fed the reference study's per-arm numbers
// (tests/data/reference-study) reproduces every table of docs/reference-study.md, cell by cell,
// to the precision the study printed. The expected values below are the study's text, typed in
// from the reference file, not output of this code.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/strings.h"
#include "report/markdown_tables.h"
#include "report/report.h"
#include "report/run_point.h"
#include "report/source_dir.h"

namespace gpufrac {
namespace {

using testing::MarkdownTable;
using testing::split_markdown_row;
using testing::table_starting_with;

// From docs/reference-study.md, "Throughput (output tok/s per GPU)".
constexpr const char* kStudyThroughput = R"(
| req/GPU | base c | shared c | baseline | HAMi | fractions | HAMi % | fractions % |
|---:|---:|---:|---:|---:|---:|---:|---:|
| 2 | 2 | 1 | 227.5 | 101.1 | 144.4 | 44.5% | 63.5% |
| 4 | 4 | 2 | 429.1 | 193.0 | 259.2 | 45.0% | 60.4% |
| 8 | 8 | 4 | 671.2 | 343.9 | 456.1 | 51.2% | 68.0% |
| 16 | 16 | 8 | 929.2 | 572.0 | 722.8 | 61.6% | 77.8% |
| 32 | 32 | 16 | 1141.8 | 831.4 | 1003.4 | 72.8% | 87.9% |
)";

// "TTFT p50 (ms) and ITL p50 (ms), same rows".
constexpr const char* kStudyLatency = R"(
| req/GPU | TTFT base | TTFT HAMi | TTFT fractions | ITL base | ITL HAMi | ITL fractions |
|---:|---:|---:|---:|---:|---:|---:|
| 2 | 48.6 | 216 | 185 | 8.61 | 19.0 | 13.2 |
| 4 | 49.0 | 374 | 347 | 9.13 | 19.3 | 14.1 |
| 8 | 331.5 | 571 | 549 | 11.00 | 21.1 | 15.4 |
| 16 | 431.0 | 731 | 739 | 15.56 | 25.2 | 19.3 |
| 32 | 481.8 | 777 | 786 | 26.20 | 35.6 | 28.9 |
)";

// "Cost of serving 16 models (rows matched on c per model)", priced at 1.00 per node-hour.
constexpr const char* kStudyCost = R"(
| c/model | baseline tok/s (2 nodes) | baseline $/1M | fractions tok/s (1 node) | fractions $/1M | change |
|---:|---:|---:|---:|---:|---:|
| 1 | 1782 | 0.3118 | 1155 | 0.2405 | -22.9% |
| 2 | 3640 | 0.1526 | 2074 | 0.1339 | -12.2% |
| 4 | 6866 | 0.0809 | 3649 | 0.0761 | -5.9% |
| 8 | 10740 | 0.0517 | 5782 | 0.0480 | -7.1% |
| 16 | 14868 | 0.0374 | 8027 | 0.0346 | -7.4% |
| 32 | 18268 | 0.0304 | 9059 | 0.0307 | +0.8% |
)";

// "Appendix (node tok/s at equal c per model, 8 vs 16 models)" (vanilla/HAMi/fractions).
constexpr const char* kStudyAppendix =
    "c1 891/809/1155, c2 1820/1544/2074, c4 3433/2751/3649, c8 5370/4576/5782, "
    "c16 7434/6651/8027, c32 9134/7544/9059";

// "Per-arm raw rows at c = 1..32 per model (TTFT p50 ms / ITL p50 ms / tok/s per GPU)".
constexpr const char* kStudyRawBaseline =
    "c1 103.6/8.58/111.4; c2 48.6/8.61/227.5; c4 49.0/9.13/429.1; c8 331.5/11.00/671.2; "
    "c16 431.0/15.56/929.2; c32 481.8/26.20/1141.8";
constexpr const char* kStudyRawHami =
    "c1 216/19.0/101.1; c2 374/19.3/193.0; c4 571/21.1/343.9; c8 731/25.2/572.0; "
    "c16 777/35.6/831.4; c32 1702/55.9/943.0";
constexpr const char* kStudyRawFractions =
    "c1 185/13.2/144.4; c2 347/14.1/259.2; c4 549/15.4/456.1; c8 739/19.3/722.8; "
    "c16 786/28.9/1003.4; c32 2159/39.2/1132.4";

MarkdownTable parse_study_table(const std::string& text) {
  MarkdownTable table;
  for (const std::string& line : split(trim(text), '\n')) {
    if (starts_with(line, "|---")) continue;
    if (table.headers.empty()) {
      table.headers = split_markdown_row(line);
    } else {
      table.rows.push_back(split_markdown_row(line));
    }
  }
  return table;
}

// Our cell rounded to the study's printed precision ("216.0" vs "216" -> "216"); our cell must
// carry at least that precision and the same suffix (%).
std::string at_study_precision(const std::string& ours, const std::string& study) {
  bool percent = !study.empty() && study.back() == '%';
  std::string study_number = percent ? study.substr(0, study.size() - 1) : study;
  size_t dot = study_number.find('.');
  int decimals = dot == std::string::npos ? 0 : int(study_number.size() - dot - 1);
  std::string our_number = ours;
  if (percent) {
    if (ours.empty() || ours.back() != '%') return "(not a percent: " + ours + ")";
    our_number.pop_back();
  }
  size_t our_dot = our_number.find('.');
  int our_decimals = our_dot == std::string::npos ? 0 : int(our_number.size() - our_dot - 1);
  if (our_decimals < decimals) return "(less precise: " + ours + ")";
  char text[64];
  bool sign = study_number[0] == '+' || study_number[0] == '-';
  std::snprintf(text, sizeof text, sign ? "%+.*f" : "%.*f", decimals,
                parse_double(our_number, "cell"));
  return std::string(text) + (percent ? "%" : "");
}

// Compares every cell of the study's table with our column of the same header (or the header
// `renamed` maps it to), row by row.
void expect_table_reproduced(const MarkdownTable& ours, const MarkdownTable& study,
                             const std::map<std::string, std::string>& renamed = {}) {
  ASSERT_EQ(ours.rows.size(), study.rows.size());
  for (size_t col = 0; col < study.headers.size(); ++col) {
    auto rename = renamed.find(study.headers[col]);
    std::string header = rename == renamed.end() ? study.headers[col] : rename->second;
    int our_col = ours.column(header);
    ASSERT_GE(our_col, 0) << "no column '" << header << "'";
    for (size_t row = 0; row < study.rows.size(); ++row) {
      EXPECT_EQ(at_study_precision(ours.rows[row][our_col], study.rows[row][col]),
                study.rows[row][col])
          << "column '" << header << "', row " << row + 1 << ": ours " << ours.rows[row][our_col];
    }
  }
}

class ReferenceStudyReport : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ResultSet set =
        group_run_points(find_run_points({testing::source_dir() + "/tests/data/reference-study"}),
                         {{"dedicated", "baseline"}, {"timeslice", "HAMi"}});
    ReportOptions options;
    options.cost.price_per_node_hour = 1.00;
    options.cost.gpus_per_node = 8;
    options.cost_models = {16};
    markdown_ = new std::string(build_report(set, options).markdown);
    tables_ = new std::map<std::string, MarkdownTable>(testing::parse_markdown_tables(*markdown_));
  }
  static void TearDownTestSuite() {
    delete markdown_;
    delete tables_;
  }
  static const MarkdownTable& table(const std::string& prefix) {
    return table_starting_with(*tables_, prefix);
  }
  static std::string* markdown_;
  static std::map<std::string, MarkdownTable>* tables_;
};
std::string* ReferenceStudyReport::markdown_ = nullptr;
std::map<std::string, MarkdownTable>* ReferenceStudyReport::tables_ = nullptr;

TEST_F(ReferenceStudyReport, ThroughputTableIsTheStudysLayoutAndValues) {
  const MarkdownTable& ours = table("Output tok/s per GPU");
  MarkdownTable study = parse_study_table(kStudyThroughput);
  EXPECT_EQ(ours.headers, study.headers);
  expect_table_reproduced(ours, study);
  // Every cell is printed at the study's precision, so the table's text is the study's text.
  EXPECT_NE(markdown_->find(std::string(trim(kStudyThroughput))), std::string::npos);
}

TEST_F(ReferenceStudyReport, LatencyTableIsTheStudysLayoutPlusPercentColumns) {
  const MarkdownTable& ours = table("TTFT p50 (ms) and ITL p50 (ms)");
  MarkdownTable study = parse_study_table(kStudyLatency);
  ASSERT_GE(ours.headers.size(), study.headers.size());
  EXPECT_EQ(std::vector<std::string>(ours.headers.begin(),
                                     ours.headers.begin() + long(study.headers.size())),
            study.headers);
  expect_table_reproduced(ours, study);
  // The % columns the study left out: shared / base, from the study's own numbers.
  for (size_t row = 0; row < study.rows.size(); ++row) {
    for (const std::string metric : {"TTFT", "ITL"}) {
      double base = parse_double(study.rows[row][size_t(study.column(metric + " base"))], "base");
      for (const std::string arm : {"HAMi", "fractions"}) {
        double shared =
            parse_double(study.rows[row][size_t(study.column(metric + " " + arm))], "x");
        char expected[32];
        std::snprintf(expected, sizeof expected, "%.1f%%", 100 * shared / base);
        int col = ours.column(metric + " " + arm + " %");
        ASSERT_GE(col, 0);
        EXPECT_EQ(ours.rows[row][size_t(col)], expected) << metric << " " << arm << " row " << row;
      }
    }
  }
}

TEST_F(ReferenceStudyReport, CostTableForSixteenModelsAtOneDollarPerNodeHour) {
  const MarkdownTable& ours = table("Cost of serving 16 models");
  // The study priced baseline and fractions; we add HAMi, so its "change" is fractions'.
  expect_table_reproduced(ours, parse_study_table(kStudyCost), {{"change", "fractions change"}});
  EXPECT_GE(ours.column("HAMi tok/s (1 node)"), 0);
}

TEST_F(ReferenceStudyReport, AppendixNodeTokensPerSecond) {
  const MarkdownTable& ours = table("Appendix");
  std::vector<std::string> entries = split(kStudyAppendix, ',');
  ASSERT_EQ(ours.rows.size(), entries.size());
  const std::vector<std::string> columns = {"baseline (8 models)", "HAMi (16 models)",
                                            "fractions (16 models)"};
  for (size_t row = 0; row < entries.size(); ++row) {
    std::vector<std::string> words = split(trim(entries[row]), ' ');
    EXPECT_EQ("c" + ours.rows[row][0], words[0]);
    std::vector<std::string> values = split(words[1], '/');
    for (size_t arm = 0; arm < columns.size(); ++arm) {
      int col = ours.column(columns[arm]);
      ASSERT_GE(col, 0) << columns[arm];
      EXPECT_EQ(at_study_precision(ours.rows[row][size_t(col)], values[arm]), values[arm])
          << words[0] << " " << columns[arm];
    }
  }
}

TEST_F(ReferenceStudyReport, PerArmRawRows) {
  const std::vector<std::pair<std::string, std::string>> arms = {
      {"baseline (dedicated)", kStudyRawBaseline},
      {"HAMi (timeslice)", kStudyRawHami},
      {"fractions:", kStudyRawFractions}};
  for (const auto& [prefix, raw] : arms) {
    const MarkdownTable& ours = table(prefix);
    std::vector<std::string> entries = split(raw, ';');
    ASSERT_EQ(ours.rows.size(), entries.size()) << prefix;
    for (size_t row = 0; row < entries.size(); ++row) {
      std::vector<std::string> words = split(trim(entries[row]), ' ');
      EXPECT_EQ("c" + ours.rows[row][size_t(ours.column("c/model"))], words[0]);
      std::vector<std::string> values = split(words[1], '/');
      const std::vector<std::string> columns = {"TTFT p50 (ms)", "ITL p50 (ms)", "tok/s per GPU"};
      for (size_t k = 0; k < columns.size(); ++k) {
        int col = ours.column(columns[k]);
        ASSERT_GE(col, 0);
        EXPECT_EQ(at_study_precision(ours.rows[row][size_t(col)], values[k]), values[k])
            << prefix << " " << words[0] << " " << columns[k];
      }
    }
  }
}

// Fed the study's own data, the "vs reference study" section puts equal numbers side by side:
// ours (derived from the summaries) and the study's (reference_study.cpp), both equal to the
// study's text typed in above.
TEST_F(ReferenceStudyReport, VsReferenceStudyOnTheStudysOwnDataMatchesItself) {
  EXPECT_NE(markdown_->find("## vs reference study\n"), std::string::npos);
  EXPECT_NE(markdown_->find("NVIDIA A100-SXM4-40GB (machine.gpu of the summaries)"),
            std::string::npos);
  // The study's % columns (and req/GPU): ours, then the study's beside them.
  MarkdownTable percent = parse_study_table(kStudyThroughput);
  percent.headers = {percent.headers[0], percent.headers[6], percent.headers[7]};
  for (auto& row : percent.rows) row = {row[0], row[6], row[7]};
  ASSERT_EQ(percent.headers, (std::vector<std::string>{"req/GPU", "HAMi %", "fractions %"}));
  const MarkdownTable& throughput = table("vs reference study: tok/s per GPU");
  expect_table_reproduced(throughput, percent);
  expect_table_reproduced(throughput, percent,
                          {{"HAMi %", "study HAMi %"}, {"fractions %", "study fractions %"}});

  MarkdownTable latency = parse_study_table(kStudyLatency);
  std::map<std::string, std::string> study_columns;
  for (const std::string& header : latency.headers) {
    std::string ours = header;
    size_t base = ours.find(" base");
    if (base != std::string::npos) ours = ours.substr(0, base) + " baseline";
    study_columns[header] = header == "req/GPU" ? header : "study " + ours;
  }
  const MarkdownTable& ours = table("vs reference study: TTFT p50");
  expect_table_reproduced(ours, latency, study_columns);
  for (auto& [header, column] : study_columns) {
    if (column.rfind("study ", 0) == 0) column = column.substr(6);
  }
  expect_table_reproduced(ours, latency, study_columns);

  const MarkdownTable& equal = table("vs reference study: equal concurrency");
  ASSERT_EQ(equal.rows.size(), 6u);
  const int fractions = equal.column("fractions %"),
            study_fractions = equal.column("study fractions %");
  ASSERT_GE(fractions, 0);
  ASSERT_GE(study_fractions, 0);
  for (const auto& row : equal.rows)
    EXPECT_EQ(row[size_t(fractions)], row[size_t(study_fractions)]);
  // The study: fractions 129.6% of baseline at c = 1 down to 108.0% at c = 16 (1155/891,
  // 8027/7434 in its appendix).
  EXPECT_EQ(equal.rows[0][size_t(study_fractions)], "129.6%");
  EXPECT_EQ(equal.rows[4][size_t(study_fractions)], "108.0%");
}

TEST_F(ReferenceStudyReport, ClosedLoopOnlySoNoOpenLoopSectionAndAPlotPerArm) {
  EXPECT_EQ(markdown_->find("## Open loop"), std::string::npos);
  for (const char* plot :
       {"itl-vs-tok-s-per-gpu-dedicated_m1.svg", "itl-vs-tok-s-per-gpu-timeslice_m2.svg",
        "itl-vs-tok-s-per-gpu-fractions_m2.svg"}) {
    EXPECT_NE(markdown_->find(std::string("(") + plot + ")"), std::string::npos) << plot;
  }
}

TEST(StudyPrecision, RoundsOursToTheStudysDecimalsAndRejectsLessPrecision) {
  EXPECT_EQ(at_study_precision("216.0", "216"), "216");
  EXPECT_EQ(at_study_precision("19.00", "19.0"), "19.0");
  EXPECT_EQ(at_study_precision("-22.9%", "-22.9%"), "-22.9%");
  EXPECT_EQ(at_study_precision("+0.8%", "+0.8%"), "+0.8%");
  EXPECT_NE(at_study_precision("0.3117", "0.3118"), "0.3118");
  EXPECT_NE(at_study_precision("8.6", "8.61"), "8.61");
  EXPECT_NE(at_study_precision("44.5", "44.5%"), "44.5%");
}

}  // namespace
}  // namespace gpufrac
