#include "experiment/packing_search.h"

#include "experiment/engine_counters.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "common/json.h"

namespace gpufrac {
namespace {

// A probe for a GPU that holds `fits` models and meets the SLO up to `capacity` of them; it
// records what was asked.
struct FakeProbe {
  int capacity;
  int fits;
  std::vector<int> asked;
  PackingProbe operator()(int m) {
    asked.push_back(m);
    PackingProbe p;
    p.models_per_gpu = m;
    p.started = m <= fits;
    p.passed = p.started && m <= capacity;
    return p;
  }
};

int search(int capacity, int fits, int max, std::vector<int>* asked = nullptr) {
  FakeProbe probe{capacity, fits, {}};
  PackingSearchResult result = search_packings(
      max, [&](int m) { return probe(m); }, [] { return false; });
  if (asked) *asked = probe.asked;
  return result.largest_passing;
}

TEST(PackingSearch, FindsTheLargestPassingPackingWhateverLimitsIt) {
  for (int fits = 1; fits <= 20; ++fits) {
    for (int capacity = 0; capacity <= 20; ++capacity) {
      std::vector<int> asked;
      int expected = std::min({capacity, fits, 16});
      EXPECT_EQ(search(capacity, fits, 16, &asked), expected) << capacity << " " << fits;
      int started = 0;
      for (int m : asked) started += m <= fits;
      EXPECT_LE(started, 6) << "packings that started (the slow probes): capacity " << capacity
                            << ", fits " << fits;
      EXPECT_EQ(std::set<int>(asked.begin(), asked.end()).size(), asked.size());
    }
  }
}

TEST(PackingSearch, MemoryBoundSearchRunsOneLoadProbe) {
  // 16 and 15 models do not start; 14 start and meet the SLO: one load probe.
  std::vector<int> asked;
  EXPECT_EQ(search(20, 14, 16, &asked), 14);
  EXPECT_EQ(asked, (std::vector<int>{16, 15, 14}));
}

TEST(PackingSearch, ComputeBoundSearchBisectsBelowTheFirstPackingThatStarts) {
  std::vector<int> asked;
  EXPECT_EQ(search(12, 16, 16, &asked), 12);
  EXPECT_EQ(asked, (std::vector<int>{16, 15, 7, 11, 13, 12}));
  EXPECT_EQ(search(0, 16, 16, &asked), 0);
  EXPECT_EQ(asked, (std::vector<int>{16, 15, 7, 3, 1}));
}

TEST(PackingSearch, OneBelowTheFirstMissIsProbedBeforeBisecting) {
  std::vector<int> asked;
  EXPECT_EQ(search(16, 18, 17, &asked), 16);  // 17 starts and misses, 16 passes: two probes
  EXPECT_EQ(asked, (std::vector<int>{17, 16}));
  EXPECT_EQ(search(16, 17, 18, &asked), 16);  // 18 does not start, 17 misses, 16 passes
  EXPECT_EQ(asked, (std::vector<int>{18, 17, 16}));
}

TEST(PackingSearch, StopsWhenInterrupted) {
  int calls = 0;
  PackingSearchResult result = search_packings(
      16,
      [&](int m) {
        ++calls;
        PackingProbe does_not_start;
        does_not_start.models_per_gpu = m;
        does_not_start.started = false;
        return does_not_start;
      },
      [&] { return calls >= 2; });
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(result.largest_passing, 0);
}

TEST(PackingSearch, JudgesEveryModelAgainstTheSlo) {
  std::string dir = testing::TempDir() + "/packing_judge";
  std::filesystem::create_directories(dir);
  auto write = [&](double ttft_p90_b, double itl_p50_b, int failed_b) {
    Json metrics_a = {{"ttft_ms", {{"p90", 500.0}}}, {"itl_ms", {{"p50", 10.0}}}, {"failed", 0}};
    Json metrics_b = {{"ttft_ms", {{"p90", ttft_p90_b}}}, {"itl_ms", {{"p50", itl_p50_b}}},
                      {"failed", failed_b}};
    Json summary = {{"targets", {{{"model", "m0"}, {"metrics", metrics_a}},
                                 {{"model", "m1"}, {"metrics", metrics_b}}}}};
    std::ofstream(dir + "/summary.json") << summary.dump();
    return dir + "/summary.json";
  };
  ExperimentSlo slo{1000, 30};
  EXPECT_TRUE(judge_probe(write(900, 20, 0), 2, slo).passed);
  PackingProbe slow = judge_probe(write(1200, 20, 0), 2, slo);
  EXPECT_FALSE(slow.passed);
  EXPECT_DOUBLE_EQ(slow.worst_ttft_p90_ms, 1200);
  EXPECT_FALSE(judge_probe(write(900, 31, 0), 2, slo).passed);
  EXPECT_FALSE(judge_probe(write(900, 20, 1), 2, slo).passed);
}

TEST(PackingSearch, AFailedProbeSaysWhetherMemoryOrComputeLimitedIt) {
  std::string dir = testing::TempDir() + "/packing_limit";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto write = [&](double ttft_p90, double itl_p50) {
    Json metrics = {{"ttft_ms", {{"p90", ttft_p90}}}, {"itl_ms", {{"p50", itl_p50}}},
                    {"completed", 24}, {"failed", 0}};
    Json summary = {{"targets", {{{"model", "m0"}, {"metrics", metrics}}}}};
    std::ofstream(dir + "/summary.json") << summary.dump();
    return dir + "/summary.json";
  };
  ExperimentSlo slo{1000, 30};
  EXPECT_EQ(judge_probe(write(900, 20), 2, slo).limit, "");
  EXPECT_EQ(judge_probe(write(900, 31), 2, slo).limit, "compute: ITL p50 over the SLO");
  PackingProbe queued = judge_probe(write(5000, 20), 2, slo);
  EXPECT_EQ(queued.limit, "queueing: TTFT p90 over the SLO with ITL within it");
  EXPECT_EQ(queued.preemptions, -1);  // no engine-counters.json
  write_engine_counters(dir, {3, 7, 2});
  PackingProbe waited = judge_probe(write(5000, 20), 2, slo);
  EXPECT_EQ(waited.limit, "memory: requests waited for KV memory (7 refusals)");
  EXPECT_EQ(waited.preemptions, 3);
  write_engine_counters(dir, {24, 0, 2});  // as many preemptions as requests
  EXPECT_EQ(judge_probe(write(5000, 40), 2, slo).limit, "memory: KV thrash (24 preemptions)");
  PackingProbe not_started;
  not_started.started = false;
  not_started.not_started_reason = "cannot place model 'm3': needs 9 GiB";
  EXPECT_EQ(probe_limit(not_started, slo), "memory: did not start");
}

TEST(EngineCounters, SumsEveryLabelSetOfTheTwoCounters) {
  EngineCounters c = parse_engine_counters(
      "# HELP vllm:num_preemptions_total Preemptions\n"
      "# TYPE vllm:num_preemptions_total counter\n"
      "vllm:num_preemptions_total{model_name=\"a\",engine=\"0\"} 2\n"
      "vllm:num_preemptions_total{model_name=\"b\",engine=\"0\"} 3\n"
      "vllm:num_preemptions_total_other 100\n"
      "gpufrac:kv_cache_backing_refusals_total{model_name=\"a\"} 11\n"
      "gpufrac:kv_cache_mapped_bytes{model_name=\"a\"} 4096\n");
  EXPECT_EQ(c.preemptions, 5);
  EXPECT_EQ(c.backing_refusals, 11);
  EngineCounters d = c - EngineCounters{1, 1, 1};
  EXPECT_EQ(d.preemptions, 4);
  EXPECT_EQ(d.backing_refusals, 10);
}

TEST(PackingSearch, MarkdownListsProbesInOrderAndWhyAPackingDidNotStart) {
  ExperimentSpec spec = parse_experiment_spec(
      "name: t\nmodel: tiny\nruns: [{arm: fractions, models_per_gpu: 2, concurrency: [1]}]\n"
      "packing_search: {arm: fractions, rate: 0.1, max_models_per_gpu: 3}\n",
      "test");
  PackingSearchResult result;
  PackingProbe too_many;
  too_many.models_per_gpu = 3;
  too_many.started = false;
  too_many.not_started_reason =
      "model 'm2' (pid 9) exited: exit code 2; its log ends: tuning GEMV | gpufrac serve: out of "
      "memory";
  PackingProbe fits;
  fits.models_per_gpu = 2;
  fits.passed = true;
  fits.worst_ttft_p90_ms = 512.25;
  fits.worst_itl_p50_ms = 20.5;
  result.probes = {too_many, fits};
  result.largest_passing = 2;
  std::string md = packing_search_markdown(spec, result);
  size_t row2 = md.find("| 2 | 512.2 | 20.50 | 0 | yes |");
  size_t row3 = md.find("| 3 | — | — | — | no: did not start |");
  ASSERT_NE(row2, std::string::npos) << md;
  ASSERT_NE(row3, std::string::npos) << md;
  EXPECT_LT(row2, row3);
  EXPECT_NE(md.find("3 model(s) per GPU did not start: model 'm2' (pid 9) exited: exit code 2; "
                    "its log ends: ... gpufrac serve: out of memory"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("tuning GEMV"), std::string::npos) << md;
  EXPECT_NE(md.find("**2 model(s) per GPU**"), std::string::npos) << md;
}

}  // namespace
}  // namespace gpufrac
