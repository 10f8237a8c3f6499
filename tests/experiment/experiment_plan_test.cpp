#include "experiment/experiment_plan.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace gpufrac {
namespace {

ExperimentSpec spec_in(const std::string& dir) {
  ExperimentSpec spec = parse_experiment_spec(
      "model: tiny\ndevice: cpu\nruns:\n"
      "  - {arm: dedicated, concurrency: [1, 2]}\n"
      "  - {arm: fractions, models_per_gpu: [2, 4], concurrency: [1, 2]}\n"
      "  - {arm: timeslice, models_per_gpu: 2, rates: [0.5]}\n",
      "spec.yaml");
  spec.output = dir;
  return spec;
}

TEST(ExperimentPlan, NodeSpecsGiveEachModelItsFraction) {
  ExperimentSpec spec = spec_in(testing::TempDir() + "/plan_nodes");
  NodeSpec fractions = experiment_node_spec(spec, "fractions", 4);
  ASSERT_EQ(fractions.models.size(), 4u);
  EXPECT_EQ(fractions.mode, SharingMode::kFractions);
  EXPECT_EQ(fractions.device, DeviceKind::kCpu);
  EXPECT_DOUBLE_EQ(*fractions.models[3].fraction.compute, 0.25);
  EXPECT_DOUBLE_EQ(*fractions.models[3].fraction.memory_share, 0.25);
  EXPECT_EQ(fractions.models[3].name, "m3");
  EXPECT_EQ(fractions.models[3].model, "tiny");
  NodeSpec timeslice = experiment_node_spec(spec, "timeslice", 2);
  EXPECT_FALSE(timeslice.models[0].fraction.compute.has_value());
  EXPECT_DOUBLE_EQ(*timeslice.models[0].fraction.memory_share, 0.5);
  NodeSpec dedicated = experiment_node_spec(spec, "dedicated", 1);
  ASSERT_EQ(dedicated.models.size(), 1u);
  EXPECT_FALSE(dedicated.models[0].fraction.memory_share.has_value());
}

TEST(ExperimentPlan, FinishedPointsAreNotPlannedAgain) {
  std::string dir = testing::TempDir() + "/plan_resume";
  std::filesystem::remove_all(dir);
  ExperimentSpec spec = spec_in(dir);
  std::vector<NodeRunPlan> plans = plan_runs(spec);
  ASSERT_EQ(plans.size(), 4u);  // dedicated, fractions-m2, fractions-m4, timeslice-m2
  EXPECT_EQ(plans[1].concurrency, (std::vector<int>{1, 2}));
  EXPECT_EQ(plans[3].rates, (std::vector<double>{0.5}));

  BenchConfig config = experiment_bench_config(spec, "fractions", 2, dir);
  std::string done = point_directory(config, 1, 0);
  std::filesystem::create_directories(done);
  std::ofstream(done + "/summary.json") << "{}";
  plans = plan_runs(spec);
  EXPECT_EQ(plans[1].concurrency, (std::vector<int>{2}));
  EXPECT_EQ(plans[0].concurrency, (std::vector<int>{1, 2}));
}

}  // namespace
}  // namespace gpufrac
