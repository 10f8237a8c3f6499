// `gpufrac report` as a user runs it: the binary on the reference study's data, its files and
// stdout, --help, and one-line errors with exit code 2.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "report/markdown_tables.h"
#include "report/source_dir.h"

namespace gpufrac {
namespace {

namespace fs = std::filesystem;

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class ReportCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("GPUFRAC_BIN");
    ASSERT_TRUE(bin) << "GPUFRAC_BIN (the gpufrac binary) must be set; ctest sets it";
    bin_ = bin;
    study_ = testing::source_dir() + "/tests/data/reference-study";
    dir_ = fs::temp_directory_path() /
           ("gpufrac-report-cmd-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  CommandResult run(const std::string& args) {
    std::string command = "'" + bin_ + "' report " + args + " >'" + (dir_ / "stdout").string() +
                          "' 2>'" + (dir_ / "stderr").string() + "'";
    int status = std::system(command.c_str());
    CommandResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(dir_ / "stdout");
    r.err = slurp(dir_ / "stderr");
    return r;
  }

  std::string bin_, study_;
  fs::path dir_;
};

TEST_F(ReportCommand, ReferenceStudyWritesMarkdownCsvAndPlots) {
  fs::path out = dir_ / "report";
  CommandResult r = run("'" + study_ + "' --out '" + out.string() +
                        "' --models 16 --price 1.00 --gpus-per-node 8 --label dedicated=baseline "
                        "--label timeslice=HAMi");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string study_row = "| 2 | 2 | 1 | 227.5 | 101.1 | 144.4 | 44.5% | 63.5% |";
  EXPECT_NE(r.out.find(study_row), std::string::npos) << r.out;
  std::string markdown = slurp(out / "report.md");
  EXPECT_EQ(markdown, r.out);
  auto tables = testing::parse_markdown_tables(markdown);
  EXPECT_EQ(testing::table_starting_with(tables, "Cost of serving 16 models").rows[0][2], "0.3118");

  std::string csv = slurp(out / "throughput-m2.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "requests_per_gpu,dedicated_concurrency,shared_concurrency,dedicated_m1_tok_s_per_gpu,"
            "timeslice_m2_tok_s_per_gpu,fractions_m2_tok_s_per_gpu,timeslice_m2_pct_of_dedicated,"
            "fractions_m2_pct_of_dedicated");
  EXPECT_NE(csv.find("\n2,2,1,227.5,101.125,144.375,"), std::string::npos) << csv;
  for (const char* file :
       {"latency-m2.csv", "cost-16-models.csv", "appendix.csv", "points-dedicated_m1.csv",
        "points-timeslice_m2.csv", "points-fractions_m2.csv",
        "tok-s-per-gpu-vs-requests-per-gpu.svg", "itl-p50-vs-tok-s-per-gpu.svg"}) {
    EXPECT_TRUE(fs::is_regular_file(out / file)) << file;
  }
  EXPECT_NE(slurp(out / "itl-p50-vs-tok-s-per-gpu.svg").find(">HAMi</text>"), std::string::npos);
}

TEST_F(ReportCommand, HelpExplainsEveryOptionWithAnExample) {
  CommandResult r = run("--help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* text :
       {"RESULT_DIR", "--out DIR", "--price PRICE", "--gpus-per-node N", "--models N[,N...]",
        "--label ARM=TEXT", "Example:", "0.3118", "requests resident per GPU"}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text;
  }
}

TEST_F(ReportCommand, ReferenceStudyAlsoWritesTheVsStudyTablesAndAPlotPerArm) {
  fs::path out = dir_ / "report";
  CommandResult r = run("'" + study_ + "' --out '" + out.string() +
                        "' --slo-ttft-p90-ms 500 --slo-itl-p50-ms 25.5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("## vs reference study"), std::string::npos);
  for (const char* file :
       {"vs-study-throughput.csv", "vs-study-latency.csv", "vs-study-equal-concurrency.csv",
        "itl-vs-tok-s-per-gpu-dedicated_m1.svg", "itl-vs-tok-s-per-gpu-timeslice_m2.svg",
        "itl-vs-tok-s-per-gpu-fractions_m2.svg"}) {
    EXPECT_TRUE(fs::is_regular_file(out / file)) << file;
  }
  std::string csv = slurp(out / "vs-study-equal-concurrency.csv");
  EXPECT_EQ(
      csv.substr(0, csv.find('\n')),
      "concurrency,timeslice_m2_pct_of_dedicated_equal_c,study_timeslice_pct_of_baseline_equal_c,"
      "fractions_m2_pct_of_dedicated_equal_c,study_fractions_pct_of_baseline_equal_c");
}

TEST_F(ReportCommand, SloOptionsAreDocumentedAndChecked) {
  CommandResult help = run("--help");
  for (const char* text :
       {"--slo-ttft-p90-ms MS", "--slo-itl-p50-ms MS", "--slo-ttft-p90-ms 1000 --slo-itl-p50-ms 30",
        "none of", "vs reference study"}) {
    EXPECT_NE(help.out.find(text), std::string::npos) << text;
  }
  for (const std::string args : {"--slo-ttft-p90-ms 0", "--slo-itl-p50-ms -1"}) {
    CommandResult r = run("'" + study_ + "' --out '" + (dir_ / "r").string() + "' " + args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
}

TEST_F(ReportCommand, ADirectoryWithoutSummariesIsOneLineAndExitTwo) {
  fs::create_directories(dir_ / "empty");
  CommandResult r = run("'" + (dir_ / "empty").string() + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("holds no summary.json"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(ReportCommand, BadOptionsAreOneLineAndExitTwo) {
  for (const std::string args : {"--price abc", "--price 0", "--gpus-per-node 0", "--models 0",
                                 "--label mig=MIG", "--bogus 1", ""}) {
    CommandResult r = run("'" + study_ + "' --out '" + (dir_ / "r").string() + "' " + args);
    if (args.empty()) {
      EXPECT_EQ(r.exit_code, 0) << r.err;
      continue;
    }
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
}

}  // namespace
}  // namespace gpufrac
