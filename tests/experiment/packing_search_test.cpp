#include "experiment/packing_search.h"

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
  EXPECT_EQ(asked, (std::vector<int>{16, 8, 12, 14, 13}));
  EXPECT_EQ(search(0, 16, 16, &asked), 0);
  EXPECT_EQ(asked, (std::vector<int>{16, 8, 4, 2, 1}));
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

}  // namespace
}  // namespace gpufrac
