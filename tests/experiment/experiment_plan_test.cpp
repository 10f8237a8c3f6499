#include "experiment/experiment_plan.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "common/error.h"
#include "node/placement.h"

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

TEST(ExperimentPlan, NodeMemoryGivesEverySharedModelTheFloorAndCeiling) {
  ExperimentSpec spec = parse_experiment_spec(
      "model: tiny\ndevice: cpu\nnode: {memory: {min: 7.75G, max: 10.5G}}\nruns:\n"
      "  - {arm: fractions, models_per_gpu: [16], concurrency: [1]}\n",
      "spec.yaml");
  NodeSpec sixteen = experiment_node_spec(spec, "fractions", 16);
  for (const ModelSpec& model : sixteen.models) {
    EXPECT_FALSE(model.fraction.memory_share.has_value());
    ASSERT_TRUE(model.fraction.elastic_memory());
    EXPECT_EQ(*model.fraction.memory_min->bytes, uint64_t(7936) << 20);
    EXPECT_EQ(*model.fraction.memory_max->bytes, uint64_t(10752) << 20);
  }
  EXPECT_TRUE(experiment_node_spec(spec, "timeslice", 16).models[3].fraction.elastic_memory());
  EXPECT_FALSE(experiment_node_spec(spec, "dedicated", 1).models[0].fraction.memory_given());
  for (const char* bad : {"node: {memory: 0.5}", "node: {memory: {min: 11G, max: 10G}}",
                          "node: {memory: {min: 1G}}"}) {
    try {
      parse_experiment_spec(std::string("runs:\n  - {arm: dedicated, concurrency: [1]}\n") + bad,
                            "bad.yaml");
      ADD_FAILURE() << "no exception for " << bad;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("bad.yaml:3: node.memory"), std::string::npos)
          << e.what();
    }
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

// A machine of `gpus` H200s (132 SMs, 143771 MiB), as NVML would list it.
MachineInventory h200s(int gpus) {
  MachineInventory machine;
  machine.nvml_loaded = true;
  machine.cpus = {0, 1};
  for (int g = 0; g < gpus; ++g) {
    GpuInfo gpu;
    gpu.index = g;
    gpu.uuid = "GPU-" + std::to_string(g);
    gpu.name = "NVIDIA H200";
    gpu.memory_total = uint64_t(143771) << 20;
    gpu.sm_count = 132;
    machine.gpus.push_back(gpu);
  }
  if (gpus == 0) machine.nvml_status = "NVML sees no GPU";
  return machine;
}

// How many of a node's models each GPU holds once placed on that machine, by NVML index.
std::map<std::string, int> models_per_gpu(const NodeSpec& node, const MachineInventory& machine) {
  Placement placement = place_models(node, select_devices(node, machine));
  std::map<std::string, int> count;
  for (const PlacedInstance& i : placement.instances) ++count[placement.devices[i.device_index].id];
  return count;
}

std::string error_of(const ExperimentSpec& spec, const MachineInventory& machine) {
  try {
    check_gpu_count(spec, machine);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// The study-shaped specs: dedicated at one model per GPU, timeslice and fractions at two, the
// study's sweep and request counts, and every node over all of their GPUs.
TEST(ExperimentPlan, StudyShapedSpecsPlaceTwoModelsPerGpuOnEveryGpu) {
  const char* source = std::getenv("GPUFRAC_SOURCE_DIR");
  ASSERT_NE(source, nullptr) << "GPUFRAC_SOURCE_DIR is set by ctest";
  const std::vector<int> sweep = {1, 2, 4, 8, 16, 32};
  for (int n : {2, 4, 8}) {
    SCOPED_TRACE("h200x" + std::to_string(n));
    ExperimentSpec spec = load_experiment_spec(std::string(source) + "/experiments/h200x" +
                                               std::to_string(n) + "-study.yaml");
    EXPECT_EQ(spec.gpus, n);
    EXPECT_EQ(spec.model, "qwen3-4b");
    EXPECT_EQ(spec.isl, 2048);
    EXPECT_EQ(spec.osl, 256);
    EXPECT_FALSE(spec.requests.has_value());  // the study's max(40, 10c)
    EXPECT_FALSE(spec.warmup.has_value());    // and min(16, 2c)
    ASSERT_EQ(spec.runs.size(), 3u);
    const std::pair<const char*, int> arms[] = {
        {"dedicated", 1}, {"timeslice", 2}, {"fractions", 2}};
    for (size_t r = 0; r < 3; ++r) {
      EXPECT_EQ(spec.runs[r].arm, arms[r].first);
      EXPECT_EQ(spec.runs[r].models_per_gpu, std::vector<int>{arms[r].second});
      EXPECT_EQ(spec.runs[r].concurrency, sweep);
    }
    ASSERT_TRUE(spec.packing_search.has_value());
    EXPECT_EQ(spec.packing_search->arm, "fractions");
    EXPECT_DOUBLE_EQ(spec.packing_search->rate, 0.1);
    EXPECT_EQ(spec.cost_models, 16);
    EXPECT_EQ(spec.gpus_per_node, 8);
    EXPECT_NO_THROW(check_gpu_count(spec, h200s(n)));
    EXPECT_NE(error_of(spec, h200s(n - 1)).find("gpus: " + std::to_string(n)), std::string::npos);

    MachineInventory machine = h200s(8);  // an 8-GPU machine runs every spec on its first n GPUs
    for (const auto& [arm, m] : arms) {
      NodeSpec node = experiment_node_spec(spec, arm, m);
      EXPECT_EQ(node.models.size(), size_t(m * n)) << arm;
      EXPECT_EQ(node.gpus.size(), size_t(n)) << arm;
      std::map<std::string, int> per_gpu = models_per_gpu(node, machine);
      ASSERT_EQ(per_gpu.size(), size_t(n)) << arm;
      for (int g = 0; g < n; ++g) EXPECT_EQ(per_gpu[std::to_string(g)], m) << arm << " GPU " << g;
    }
    int most = spec.packing_search->max_models_per_gpu;
    std::map<std::string, int> per_gpu =
        models_per_gpu(experiment_node_spec(spec, "fractions", most), machine);
    ASSERT_EQ(per_gpu.size(), size_t(n));
    for (int g = 0; g < n; ++g) EXPECT_EQ(per_gpu[std::to_string(g)], most) << "GPU " << g;
    BenchConfig bench = experiment_bench_config(spec, "fractions", 2, spec.output);
    EXPECT_EQ(bench.gpus, n);  // the summaries' config.gpus, which the report divides by
  }
}

TEST(ExperimentPlan, TheGpuCountIsCheckedAgainstTheMachineBeforeAnyArm) {
  ExperimentSpec spec = parse_experiment_spec(
      "device: cuda\ngpus: 4\nruns:\n  - {arm: fractions, concurrency: [1]}\n", "spec.yaml");
  EXPECT_NO_THROW(check_gpu_count(spec, h200s(4)));
  EXPECT_NO_THROW(check_gpu_count(spec, h200s(8)));
  std::string fewer = error_of(spec, h200s(2));
  EXPECT_NE(fewer.find("spec.yaml: gpus: 4, but this machine has 2 GPUs"), std::string::npos)
      << fewer;
  EXPECT_NE(fewer.find("set gpus: 2 or fewer"), std::string::npos) << fewer;
  std::string none = error_of(spec, h200s(0));
  EXPECT_NE(none.find("device: cuda, but NVML sees no GPU"), std::string::npos) << none;
  EXPECT_EQ(where_arms_run(spec, h200s(4)), "4 GPUs");

  // On the CPU a node has one device: gpus above 1 cannot run there.
  spec.device = "auto";
  std::string cpu = error_of(spec, h200s(0));
  EXPECT_NE(cpu.find("gpus: 4, but the arms run on the CPU (NVML sees no GPU)"), std::string::npos)
      << cpu;
  EXPECT_NE(cpu.find("set gpus: 1"), std::string::npos) << cpu;
  spec.device = "cpu";
  EXPECT_NE(error_of(spec, h200s(8)).find("(device: cpu)"), std::string::npos);
  spec.gpus = 1;
  EXPECT_NO_THROW(check_gpu_count(spec, h200s(0)));
  EXPECT_EQ(where_arms_run(spec, h200s(8)), "the CPU");
}

}  // namespace
}  // namespace gpufrac
