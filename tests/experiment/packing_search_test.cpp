#include "experiment/packing_search.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/json.h"

namespace gpufrac {
namespace {

// A probe that passes up to `capacity` models per GPU and records what was asked.
struct FakeProbe {
  int capacity;
  std::vector<int> asked;
  PackingProbe operator()(int m) {
    asked.push_back(m);
    PackingProbe p;
    p.models_per_gpu = m;
    p.passed = m <= capacity;
    return p;
  }
};

int search(int capacity, int max, std::vector<int>* asked = nullptr) {
  FakeProbe probe{capacity, {}};
  PackingSearchResult result = search_packings(
      max, [&](int m) { return probe(m); }, [] { return false; });
  if (asked) *asked = probe.asked;
  return result.largest_passing;
}

TEST(PackingSearch, FindsTheLargestPassingPackingWithFewProbes) {
  for (int capacity = 0; capacity <= 20; ++capacity) {
    std::vector<int> asked;
    EXPECT_EQ(search(capacity, 16, &asked), std::min(capacity, 16)) << capacity;
    EXPECT_LE(asked.size(), 9u) << capacity;
  }
  std::vector<int> asked;
  search(12, 16, &asked);
  EXPECT_EQ(asked, (std::vector<int>{1, 2, 4, 8, 16, 12, 14, 13}));
}

TEST(PackingSearch, StopsWhenInterrupted) {
  int calls = 0;
  PackingSearchResult result = search_packings(
      16,
      [&](int m) {
        ++calls;
        return PackingProbe{m, true, 0, 0, 0, ""};
      },
      [&] { return calls >= 2; });
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(result.largest_passing, 2);
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
