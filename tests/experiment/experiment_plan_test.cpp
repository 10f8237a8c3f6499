#include "experiment/experiment_plan.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"

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

TEST(ExperimentPlan, SmCeilingAboveTheShareOversubscribesFractionsOnly) {
  ExperimentSpec spec = parse_experiment_spec(
      "model: tiny\ndevice: cpu\nnode: {sm_ceiling: 0.25, context_reserve: 192M}\nruns:\n"
      "  - {arm: fractions, models_per_gpu: [2, 16], concurrency: [1]}\n",
      "spec.yaml");
  NodeSpec sixteen = experiment_node_spec(spec, "fractions", 16);
  EXPECT_TRUE(sixteen.oversubscribe_compute);
  EXPECT_DOUBLE_EQ(*sixteen.models[15].fraction.compute, 0.25);
  EXPECT_DOUBLE_EQ(*sixteen.models[15].fraction.memory_share, 1.0 / 16);
  EXPECT_EQ(sixteen.context_reserve_bytes, uint64_t(192) << 20);
  NodeSpec two = experiment_node_spec(spec, "fractions", 2);  // 1/2 is above the ceiling
  EXPECT_FALSE(two.oversubscribe_compute);
  EXPECT_DOUBLE_EQ(*two.models[0].fraction.compute, 0.5);
  NodeSpec timeslice = experiment_node_spec(spec, "timeslice", 16);
  EXPECT_FALSE(timeslice.oversubscribe_compute);
  EXPECT_FALSE(timeslice.models[0].fraction.compute.has_value());
  try {
    parse_experiment_spec("runs:\n  - {arm: dedicated, concurrency: [1]}\nnode: {sm_ceiling: 2}\n",
                          "bad.yaml");
    FAIL() << "no exception";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("node.sm_ceiling"), std::string::npos) << e.what();
  }
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
