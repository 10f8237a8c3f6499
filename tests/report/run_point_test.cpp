// Reading summary.json files and scanning result directories: what is accepted, and the one-line
// UsageError for everything that is not.
#include "report/run_point.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"

namespace gpufrac {
namespace {

namespace fs = std::filesystem;

Json summary(const std::string& arm = "fractions", int concurrency = 4) {
  return Json::parse(R"({"schema": "gpufrac.summary/1",
    "config": {"arm": ")" +
                     arm + R"(", "models_per_gpu": 2, "gpus": 8, "load": "closed",
               "concurrency": )" +
                     std::to_string(concurrency) + R"(, "request_rate": null},
    "machine": {"gpu": "NVIDIA H200"},
    "targets": [],
    "aggregate": {"output_token_throughput": 3649.0, "ttft_ms_p50": 549, "itl_ms_p50": null,
                  "pooled": {"ttft_ms": {"p50": 550.5}}, "completed": 640, "failed": 0}})");
}

class ScratchDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gpufrac-report-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const fs::path& relative, const std::string& text) {
    fs::create_directories((dir_ / relative).parent_path());
    std::ofstream(dir_ / relative) << text;
  }
  std::string usage_error(const std::vector<std::string>& paths) {
    try {
      find_run_points(paths);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "(no error)";
  }
  fs::path dir_;
};

TEST(RunPointFromSummary, ReadsConfigAndAggregate) {
  RunPoint p = run_point_from_summary(summary(), "x/summary.json");
  EXPECT_EQ(p.arm, "fractions");
  EXPECT_EQ(p.models(), 16);
  EXPECT_EQ(p.concurrency, 4);
  EXPECT_EQ(p.requests_per_gpu(), 8);
  EXPECT_DOUBLE_EQ(*p.tok_s_per_gpu(), 456.125);
  EXPECT_DOUBLE_EQ(*p.ttft_p50_ms, 549);
  EXPECT_FALSE(p.itl_p50_ms);  // null
  EXPECT_DOUBLE_EQ(*p.pooled_ttft_p50_ms, 550.5);
  EXPECT_FALSE(p.pooled_itl_p50_ms);  // absent
  EXPECT_DOUBLE_EQ(*p.completed, 640);
  EXPECT_EQ(p.gpu_name, "NVIDIA H200");
}

TEST(RunPointFromSummary, TailPercentilesAreTheMeanOfThePerTargetValues) {
  Json s = summary();
  EXPECT_FALSE(run_point_from_summary(s, "x").ttft_p90_ms);  // no targets: aggregate only
  s["aggregate"]["request_throughput"] = 1.25;
  s["targets"] = Json::parse(R"([
    {"model": "m0", "metrics": {"ttft_ms": {"p90": 600, "p99": 900}, "itl_ms": {"p90": 20}}},
    {"model": "m1", "metrics": {"ttft_ms": {"p90": 800, "p99": 1500}, "itl_ms": {"p90": null}}}])");
  RunPoint p = run_point_from_summary(s, "x");
  EXPECT_DOUBLE_EQ(*p.ttft_p90_ms, 700);
  EXPECT_DOUBLE_EQ(*p.ttft_p99_ms, 1200);
  EXPECT_FALSE(p.itl_p90_ms);  // one model lacks it: no mean over the others
  EXPECT_DOUBLE_EQ(*p.request_throughput, 1.25);

  s["targets"][1]["metrics"]["ttft_ms"]["p90"] = "slow";
  try {
    run_point_from_summary(s, "runs/r0.1/summary.json");
    ADD_FAILURE() << "a non-number p90 was accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(
                  "runs/r0.1/summary.json: targets[1].metrics.ttft_ms.p90 must be a number", 0),
              0u)
        << e.what();
  }
  s["targets"] = "m0";
  EXPECT_THROW(run_point_from_summary(s, "x"), UsageError);
}

TEST(RunPointFromSummary, OpenLoopNeedsARate) {
  Json s = summary();
  s["config"]["load"] = "open";
  s["config"]["concurrency"] = nullptr;
  EXPECT_THROW(run_point_from_summary(s, "x"), UsageError);
  s["config"]["request_rate"] = 0.25;
  RunPoint p = run_point_from_summary(s, "x");
  EXPECT_FALSE(p.closed_loop);
  EXPECT_DOUBLE_EQ(*p.request_rate, 0.25);
  EXPECT_FALSE(p.concurrency);
}

TEST(RunPointFromSummary, BadFieldsNameTheFileAndTheField) {
  struct Case {
    std::string pointer, field;
    Json value;
  };
  for (const Case& c :
       std::vector<Case>{{"/schema", "schema", "other/2"},
                         {"/config/arm", "config.arm", "mig"},
                         {"/config/gpus", "config.gpus", 0},
                         {"/config/models_per_gpu", "config.models_per_gpu", "2"},
                         {"/config/load", "config.load", "sweep"},
                         {"/config/concurrency", "config.concurrency", nullptr},
                         {"/aggregate/ttft_ms_p50", "aggregate.ttft_ms_p50", "fast"},
                         {"/aggregate", "aggregate", 3}}) {
    Json s = summary();
    s[Json::json_pointer(c.pointer)] = c.value;
    try {
      run_point_from_summary(s, "runs/c4/summary.json");
      ADD_FAILURE() << c.field << " accepted";
    } catch (const UsageError& e) {
      std::string message = e.what();
      EXPECT_EQ(message.rfind("runs/c4/summary.json: " + c.field + " ", 0), 0u) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos);
    }
  }
}

TEST_F(ScratchDir, FindsSummariesRecursivelyOnceEach) {
  write("fractions-m2/c4/summary.json", summary("fractions", 4).dump());
  write("fractions-m2/c1/summary.json", summary("fractions", 1).dump());
  write("fractions-m2/c1/records.jsonl", "{}\n");
  std::vector<RunPoint> points =
      find_run_points({dir_.string(), (dir_ / "fractions-m2/c4").string(),
                       (dir_ / "fractions-m2/c1/summary.json").string()});
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].concurrency, 1);
  EXPECT_EQ(points[1].concurrency, 4);
}

TEST_F(ScratchDir, ADirectoryWithoutSummariesIsAOneLineUsageError) {
  write("notes.txt", "nothing here");
  std::string message = usage_error({dir_.string()});
  EXPECT_NE(message.find("holds no summary.json"), std::string::npos) << message;
  EXPECT_NE(message.find(dir_.string()), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
  EXPECT_NE(usage_error({(dir_ / "missing").string()}).find("does not exist"), std::string::npos);
  EXPECT_NE(usage_error({}).find("RESULT_DIR"), std::string::npos);
}

TEST_F(ScratchDir, ATruncatedSummaryIsAUsageErrorNamingIt) {
  write("c1/summary.json", summary().dump().substr(0, 40));
  std::string message = usage_error({dir_.string()});
  EXPECT_NE(message.find("c1/summary.json: is not valid JSON"), std::string::npos) << message;
}

}  // namespace
}  // namespace gpufrac
