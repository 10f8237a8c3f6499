// Placement: shares become SM percentages and byte caps; memory is never over-committed; compute
// oversubscribes only when the spec allows; an unplaceable spec names the field and places nothing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>

#include "common/error.h"
#include "node/placement.h"

namespace gpufrac {
namespace {

constexpr uint64_t kGiB = uint64_t(1) << 30;
constexpr uint64_t kMiB = uint64_t(1) << 20;

MachineInventory machine_with_gpus(int count, uint64_t memory) {
  MachineInventory m;
  m.nvml_loaded = true;
  for (int i = 0; i < count; ++i) {
    GpuInfo g;
    g.index = i;
    g.uuid = "GPU-" + std::to_string(i);
    g.name = "Test GPU";
    g.memory_total = memory;
    g.sm_count = 132;
    m.gpus.push_back(g);
  }
  m.cpus = {0, 1, 2, 3};
  m.host_memory_bytes = 16 * kGiB;
  return m;
}

MachineInventory cpu_machine(int cores) {
  MachineInventory m;
  m.nvml_status = "no NVIDIA driver";
  for (int i = 0; i < cores; ++i) m.cpus.push_back(i);
  m.host_memory_bytes = 16 * kGiB;
  return m;
}

Placement place(const std::string& yaml, const MachineInventory& machine) {
  NodeSpec spec = parse_node_spec(yaml, "spec.yaml");
  return place_models(spec, select_devices(spec, machine));
}

std::string placement_error(const std::string& yaml, const MachineInventory& machine) {
  try {
    place(yaml, machine);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Placement, TwoHalvesOfAnA100GetTheStudysCap) {
  Placement p = place(R"(
models:
  - {name: a, model: tiny, fraction: {compute: 0.5, memory: 0.5}}
  - {name: b, model: tiny, fraction: {compute: 0.5, memory: 0.5}}
)", machine_with_gpus(1, 40 * kGiB));
  ASSERT_EQ(p.instances.size(), 2u);
  for (const PlacedInstance& i : p.instances) {
    EXPECT_EQ(i.device_index, 0u);
    EXPECT_EQ(i.sm_percent, 50);
    EXPECT_EQ(i.mode, SharingMode::kFractions);
    EXPECT_EQ(i.memory_cap_bytes, 19968 * kMiB);  // (40960 - 1024) / 2 MiB
  }
  EXPECT_EQ(gpu_memory_utilization(p.instances[0], p.devices[0]), "0.4875");
}

TEST(Placement, BinpackFillsTheFirstGpuSpreadEvensOut) {
  std::string models = R"(
models:
  - {name: a, model: tiny, fraction: {compute: 0.25, memory: 0.25}}
  - {name: b, model: tiny, fraction: {compute: 0.25, memory: 0.25}}
  - {name: c, model: tiny, fraction: {compute: 0.25, memory: 0.25}}
)";
  Placement packed = place(models, machine_with_gpus(3, 80 * kGiB));
  for (const PlacedInstance& i : packed.instances) EXPECT_EQ(i.device_index, 0u);
  Placement spread = place("placement: spread\n" + models, machine_with_gpus(3, 80 * kGiB));
  EXPECT_EQ(spread.instances[0].device_index, 0u);
  EXPECT_EQ(spread.instances[1].device_index, 1u);
  EXPECT_EQ(spread.instances[2].device_index, 2u);
}

TEST(Placement, BinpackPlacesLargestFirstSoEverythingFits) {
  // In spec order, first-fit would put 0.3 and 0.3 on GPU 0 and then fail 0.7 nowhere... it
  // fits GPU 1; the point is that the result never over-commits and keeps spec order.
  Placement p = place(R"(
models:
  - {name: small1, model: tiny, fraction: {compute: 0.3, memory: 0.3}}
  - {name: big, model: tiny, fraction: {compute: 0.7, memory: 0.7}}
  - {name: small2, model: tiny, fraction: {compute: 0.3, memory: 0.3}}
  - {name: big2, model: tiny, fraction: {compute: 0.7, memory: 0.7}}
)", machine_with_gpus(2, 80 * kGiB));
  ASSERT_EQ(p.instances.size(), 4u);
  EXPECT_EQ(p.instances[0].instance_name, "small1");
  EXPECT_EQ(p.instances[1].instance_name, "big");
  EXPECT_NE(p.instances[1].device_index, p.instances[3].device_index);
}

TEST(Placement, ReplicasAreSeparateInstances) {
  Placement p = place(
      "models: [{name: a, model: tiny, replicas: 3, fraction: {compute: 0.3, memory: 0.3}}]",
      machine_with_gpus(1, 80 * kGiB));
  ASSERT_EQ(p.instances.size(), 3u);
  EXPECT_EQ(p.instances[0].instance_name, "a#0");
  EXPECT_EQ(p.instances[2].instance_name, "a#2");
}

TEST(Placement, MemoryIsNeverOverCommitted) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> share(0.05, 0.7);
  int placed = 0, refused = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string yaml = trial % 2 ? "placement: spread\noversubscribe_compute: true\nmodels:\n"
                                 : "oversubscribe_compute: true\nmodels:\n";
    int n = 1 + int(rng() % 8);
    for (int m = 0; m < n; ++m) {
      yaml += "  - {name: m" + std::to_string(m) + ", model: tiny, fraction: {compute: 0.5, memory: ";
      yaml += m % 3 == 0 ? std::to_string(int(share(rng) * 80)) + "G" : std::to_string(share(rng));
      yaml += "}}\n";
    }
    NodeSpec spec = parse_node_spec(yaml, "spec.yaml");
    Placement p;
    try {
      p = place_models(spec, select_devices(spec, machine_with_gpus(2, 80 * kGiB)));
    } catch (const UsageError&) {
      ++refused;
      continue;
    }
    ++placed;
    std::vector<uint64_t> used(p.devices.size());
    for (const PlacedInstance& i : p.instances) {
      EXPECT_GT(i.memory_cap_bytes, 0u);
      used[i.device_index] += i.memory_cap_bytes + spec.context_reserve_bytes;
    }
    for (size_t d = 0; d < used.size(); ++d) EXPECT_LE(used[d], p.devices[d].memory_bytes);
  }
  EXPECT_GT(placed, 50);
  EXPECT_GT(refused, 10);
}

TEST(Placement, MemoryThatDoesNotFitPlacesNothing) {
  std::string message = placement_error(R"(
models:
  - {name: a, model: tiny, fraction: {compute: 0.5, memory: 60G}}
  - {name: b, model: tiny, fraction: {compute: 0.5, memory: 30G}}
)", machine_with_gpus(1, 80 * kGiB));
  EXPECT_NE(message.find("cannot place model 'b'"), std::string::npos) << message;
  EXPECT_NE(message.find("models[1].fraction.memory"), std::string::npos) << message;
  EXPECT_NE(message.find("nothing was started"), std::string::npos) << message;
}

TEST(Placement, ComputeOversubscribesOnlyWhenAllowed) {
  std::string models = R"(
models:
  - {name: a, model: tiny, fraction: {compute: 0.7, memory: 0.4}}
  - {name: b, model: tiny, fraction: {compute: 0.7, memory: 0.4}}
)";
  std::string message = placement_error(models, machine_with_gpus(1, 80 * kGiB));
  EXPECT_NE(message.find("models[1].fraction.compute"), std::string::npos) << message;
  EXPECT_NE(message.find("oversubscribe_compute: true"), std::string::npos) << message;
  Placement p = place("oversubscribe_compute: true\n" + models, machine_with_gpus(1, 80 * kGiB));
  EXPECT_EQ(p.instances[1].sm_percent, 70);
}

TEST(Placement, FractionsNeedComputeAndMemory) {
  std::string no_compute = placement_error(
      "models: [{name: a, model: tiny, fraction: {memory: 0.5}}]", machine_with_gpus(1, 80 * kGiB));
  EXPECT_NE(no_compute.find("models[0].fraction.compute: missing"), std::string::npos) << no_compute;
  std::string no_memory = placement_error(
      "mode: timeslice\nmodels: [{name: a, model: tiny}]", machine_with_gpus(1, 80 * kGiB));
  EXPECT_NE(no_memory.find("models[0].fraction.memory: missing"), std::string::npos) << no_memory;
}

TEST(Placement, DedicatedHoldsOneModelAndGetsTheWholeGpu) {
  std::string models = "mode: dedicated\nmodels: [{name: a, model: tiny}, {name: b, model: tiny}]\n";
  Placement p = place(models, machine_with_gpus(2, 80 * kGiB));
  EXPECT_NE(p.instances[0].device_index, p.instances[1].device_index);
  EXPECT_EQ(p.instances[0].sm_percent, 100);
  EXPECT_EQ(p.instances[0].memory_cap_bytes, 80 * kGiB - 512 * kMiB);
  std::string message = placement_error(models, machine_with_gpus(1, 80 * kGiB));
  EXPECT_NE(message.find("dedicated"), std::string::npos) << message;
}

TEST(Placement, ModePerGpu) {
  Placement p = place(R"(
gpus: [{gpu: 1, mode: timeslice}, {gpu: GPU-0, mode: fractions}]
models:
  - {name: a, model: tiny, fraction: {compute: 0.6, memory: 0.6}}
  - {name: b, model: tiny, fraction: {compute: 0.6, memory: 0.3}}
)", machine_with_gpus(2, 80 * kGiB));
  ASSERT_EQ(p.devices.size(), 2u);
  EXPECT_EQ(p.devices[0].id, "1");
  EXPECT_EQ(p.devices[0].mode, SharingMode::kTimeslice);
  EXPECT_EQ(p.devices[1].uuid, "GPU-0");
  // Both fit the timeslice GPU by memory (compute is not partitioned there).
  EXPECT_EQ(p.instances[0].mode, SharingMode::kTimeslice);
  EXPECT_EQ(p.instances[1].mode, SharingMode::kTimeslice);
  EXPECT_EQ(p.instances[1].sm_percent, 100);
}

TEST(Placement, UnknownGpuAndMissingGpusAreSpecErrors) {
  std::string unknown = placement_error("gpus: [5]\nmodels: [{name: a, model: tiny}]",
                                        machine_with_gpus(2, 80 * kGiB));
  EXPECT_NE(unknown.find("gpus[0]"), std::string::npos) << unknown;
  std::string no_gpu = placement_error("device: cuda\nmodels: [{name: a, model: tiny}]", cpu_machine(2));
  EXPECT_NE(no_gpu.find("device: cuda"), std::string::npos) << no_gpu;
  EXPECT_NE(no_gpu.find("device: auto or cpu"), std::string::npos) << no_gpu;
}

// A model's `gpu` puts every replica of it there (by index or UUID), before the others are
// placed; the others go where room is left.
TEST(Placement, AModelsGpuPinsItTheOthersGoWhereRoomIsLeft) {
  Placement p = place(R"(
models:
  - {name: free1, model: tiny, fraction: {compute: 0.5, memory: 0.5}}
  - {name: on3, model: tiny, gpu: 3, replicas: 2, fraction: {compute: 0.5, memory: 0.5}}
  - {name: free2, model: tiny, fraction: {compute: 0.5, memory: 0.5}}
  - {name: on0, model: tiny, gpu: GPU-0, fraction: {compute: 0.5, memory: 0.5}}
)", machine_with_gpus(4, 80 * kGiB));
  ASSERT_EQ(p.instances.size(), 5u);
  std::vector<std::string> gpu_of;
  for (const PlacedInstance& i : p.instances) gpu_of.push_back(p.devices[i.device_index].id);
  // Spec order: free1, on3#0, on3#1, free2, on0. binpack: on3 fills GPU 3 and on0 takes half of
  // GPU 0 first, so free1 joins on0 and free2 goes on to GPU 1.
  EXPECT_EQ(gpu_of, (std::vector<std::string>{"0", "3", "3", "1", "0"}));

  // Pinned past what the GPU holds: the pinned GPU's misfit, even with room elsewhere.
  std::string full = placement_error(R"(
models:
  - {name: a, model: tiny, gpu: 1, fraction: {compute: 0.6, memory: 0.5}}
  - {name: b, model: tiny, gpu: 1, fraction: {compute: 0.6, memory: 0.5}}
)", machine_with_gpus(2, 80 * kGiB));
  EXPECT_NE(full.find("cannot place model 'b': models[1].fraction.compute: needs 0.6 of the SMs, "
                      "but GPU 1 has 0.4 left"), std::string::npos) << full;

  // A GPU the node does not have, or that its gpus list leaves out.
  std::string missing = placement_error(
      "models: [{name: a, model: tiny, gpu: 7, fraction: {compute: 0.5, memory: 0.5}}]",
      machine_with_gpus(2, 80 * kGiB));
  EXPECT_NE(missing.find("spec.yaml: models[0].gpu: '7' is not one of this node's devices (0, 1); "
                         "list it under gpus, or drop gpu"), std::string::npos) << missing;
  std::string unlisted = placement_error(
      "gpus: [0]\nmodels: [{name: a, model: tiny, gpu: 1, fraction: {compute: 0.5, memory: 0.5}}]",
      machine_with_gpus(2, 80 * kGiB));
  EXPECT_NE(unlisted.find("models[0].gpu: '1' is not one of this node's devices (0)"),
            std::string::npos) << unlisted;
  // On the CPU, the one device is "cpu" (or 0).
  Placement cpu = place(
      "models: [{name: a, model: tiny, gpu: cpu, fraction: {compute: 0.5, memory: 0.25}}]",
      cpu_machine(2));
  EXPECT_TRUE(cpu.devices[cpu.instances[0].device_index].is_cpu());
}

// On GPUs of different sizes a memory share is of the model's own GPU: its cap (the memcap shim's
// GPUFRAC_MEMCAP_BYTES, MPS's pinned memory limit) and {gpu_memory_utilization} follow that GPU.
TEST(Placement, AMemoryShareIsOfTheModelsOwnGpu) {
  MachineInventory machine = machine_with_gpus(2, 80 * kGiB);
  machine.gpus[1].memory_total = 40 * kGiB;
  for (const char* mode : {"timeslice", "fractions"}) {
    Placement p = place(std::string("mode: ") + mode + R"(
models:
  - {name: a, model: tiny, gpu: 0, fraction: {compute: 0.5, memory: 0.5}}
  - {name: b, model: tiny, gpu: 1, fraction: {compute: 0.5, memory: 0.5}}
)",
                        machine);
    EXPECT_EQ(p.instances[0].memory_cap_bytes, 40 * kGiB - 512 * kMiB) << mode;
    EXPECT_EQ(p.instances[1].memory_cap_bytes, 20 * kGiB - 512 * kMiB) << mode;
    EXPECT_EQ(gpu_memory_utilization(p.instances[1], p.devices[1]), "0.4875") << mode;
  }
}

// docs/node.md's mixed-mode example ("Several GPUs") places as the text under it says.
TEST(Placement, TheMixedModeExampleInDocsPlacesAsDocumented) {
  const char* source = std::getenv("GPUFRAC_SOURCE_DIR");
  ASSERT_NE(source, nullptr) << "GPUFRAC_SOURCE_DIR is set by ctest";
  std::ifstream in(std::string(source) + "/docs/node.md");
  std::string line, block;
  bool in_block = false;
  while (std::getline(in, line)) {
    if (!in_block && line == "name: mixed") in_block = true;
    if (in_block && line == "```") break;
    if (in_block) block += line + "\n";
  }
  ASSERT_FALSE(block.empty()) << "no spec named mixed in docs/node.md";
  Placement p = place(block, machine_with_gpus(4, 80 * kGiB));
  std::vector<std::pair<std::string, std::string>> where;  // instance, GPU
  for (const PlacedInstance& i : p.instances) {
    where.emplace_back(i.instance_name, p.devices[i.device_index].id);
  }
  EXPECT_EQ(where, (std::vector<std::pair<std::string, std::string>>{{"big", "0"},
                                                                    {"ts-a", "1"},
                                                                    {"ts-b", "1"},
                                                                    {"q#0", "2"},
                                                                    {"q#1", "2"},
                                                                    {"q#2", "3"},
                                                                    {"q#3", "3"}}));
  EXPECT_EQ(p.instances[0].mode, SharingMode::kDedicated);
  EXPECT_EQ(p.instances[1].mode, SharingMode::kTimeslice);
  EXPECT_EQ(p.instances[3].mode, SharingMode::kFractions);
}

TEST(Placement, CpuFractionsPinDisjointCoresTimesliceFloats) {
  std::string models = R"(
models:
  - {name: a, model: tiny, fraction: {compute: 0.5, memory: 0.25}}
  - {name: b, model: tiny, fraction: {compute: 0.5, memory: 0.25}}
)";
  Placement p = place(models, cpu_machine(4));
  ASSERT_EQ(p.devices.size(), 1u);
  EXPECT_TRUE(p.devices[0].is_cpu());
  EXPECT_EQ(p.instances[0].cpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(p.instances[1].cpus, (std::vector<int>{2, 3}));
  Placement floating = place("mode: timeslice\n" + models, cpu_machine(4));
  EXPECT_TRUE(floating.instances[0].cpus.empty());
  EXPECT_TRUE(floating.instances[1].cpus.empty());
  // The same spec on a GPU machine but device: cpu runs on the CPU too.
  Placement forced = place("device: cpu\n" + models, machine_with_gpus(1, 80 * kGiB));
  EXPECT_TRUE(forced.devices[0].is_cpu());
}

TEST(Placement, CpuCoresAreNotOversubscribedUnlessAllowed) {
  std::string models = R"(
models:
  - {name: a, model: tiny, fraction: {compute: 0.3, memory: 0.2}}
  - {name: b, model: tiny, fraction: {compute: 0.3, memory: 0.2}}
  - {name: c, model: tiny, fraction: {compute: 0.3, memory: 0.2}}
)";
  std::string message = placement_error(models, cpu_machine(2));
  EXPECT_NE(message.find("core"), std::string::npos) << message;
  Placement p = place("oversubscribe_compute: true\n" + models, cpu_machine(2));
  EXPECT_EQ(p.instances[2].cpus, (std::vector<int>{0}));  // wrapped onto core 0 again
}

// Elastic memory: floors (+ reserves) must fit the GPU, each ceiling (+ reserve) alone too; the
// ceilings together may be more than the GPU.
TEST(Placement, ElasticFloorsFitTheGpuWhileCeilingsOverlap) {
  Placement p = place(R"(
models:
  - {name: a, model: tiny, replicas: 4, fraction: {compute: 0.25, memory: {min: 0.25, max: 0.5}}}
)", machine_with_gpus(1, 80 * kGiB));
  ASSERT_EQ(p.instances.size(), 4u);
  for (const PlacedInstance& i : p.instances) {
    EXPECT_EQ(i.device_index, 0u);
    EXPECT_TRUE(i.elastic_memory);
    EXPECT_EQ(i.memory_floor_bytes, 20 * kGiB - 512 * kMiB);  // 0.25 * 80 GiB - the reserve
    EXPECT_EQ(i.memory_cap_bytes, 40 * kGiB - 512 * kMiB);    // the ceiling
  }
  EXPECT_EQ(elastic_pool_bytes(p, 0, 512 * kMiB), 78 * kGiB);  // all but the four reserves

  std::string error = placement_error(R"(
models:
  - {name: a, model: tiny, replicas: 4, fraction: {compute: 0.2, memory: {min: 0.25, max: 0.5}}}
  - {name: b, model: tiny, fraction: {compute: 0.2, memory: {min: 1G, max: 2G}}}
)", machine_with_gpus(1, 80 * kGiB));
  EXPECT_NE(error.find("cannot place model 'b': models[1].fraction.memory.min: needs 1 GiB + 512 "
                       "MiB reserve, but GPU 0 has 0 B left; lower min"),
            std::string::npos)
      << error;
}

TEST(Placement, StaticCapsAndElasticFloorsShareAGpu) {
  Placement p = place(R"(
models:
  - {name: s, model: tiny, fraction: {compute: 0.5, memory: 0.5}}
  - {name: e, model: tiny, fraction: {compute: 0.25, memory: {min: 10G, max: 30G}}}
  - {name: f, model: tiny, fraction: {compute: 0.25, memory: {min: 0.001, max: 0.25}}}
)", machine_with_gpus(1, 80 * kGiB));
  const PlacedInstance& s = p.instances[0];
  EXPECT_FALSE(s.elastic_memory);
  EXPECT_EQ(s.memory_cap_bytes, 40 * kGiB - 512 * kMiB);  // static memory as before
  EXPECT_EQ(p.instances[1].memory_floor_bytes, 10 * kGiB);
  EXPECT_EQ(p.instances[1].memory_cap_bytes, 30 * kGiB);
  EXPECT_EQ(p.instances[2].memory_floor_bytes, 0u);  // a floor share below the reserve: none
  // The GPU less three reserves and the static cap.
  EXPECT_EQ(elastic_pool_bytes(p, 0, 512 * kMiB), 80 * kGiB - 3 * 512 * kMiB - s.memory_cap_bytes);
}

TEST(Placement, ElasticMemoryErrorsNameTheFieldAndTheFix) {
  std::string error = placement_error(
      "models: [{name: a, model: tiny, fraction: {compute: 0.5, memory: {min: 1G, max: 80G}}}]",
      machine_with_gpus(1, 80 * kGiB));
  EXPECT_NE(error.find("models[0].fraction.memory.max: 80 GiB + 512 MiB reserve is more than GPU "
                       "0's 80 GiB; lower max"),
            std::string::npos)
      << error;
  error = placement_error(
      "models: [{name: a, model: tiny, fraction: {compute: 0.5, memory: {min: 0.5, max: 10G}}}]",
      machine_with_gpus(1, 80 * kGiB));
  EXPECT_NE(error.find("models[0].fraction.memory: min (39.5 GiB) is above max (10 GiB) on GPU 0"),
            std::string::npos)
      << error;
  error = placement_error(
      "models: [{name: a, model: tiny, fraction: {compute: 0.5, memory: {min: 0, max: 0.001}}}]",
      machine_with_gpus(1, 80 * kGiB));
  EXPECT_NE(error.find("models[0].fraction.memory.max: leaves nothing"), std::string::npos)
      << error;
}

TEST(Placement, ADedicatedGpuIsNotElastic) {
  Placement p = place(
      "mode: dedicated\nmodels: [{name: a, model: tiny, fraction: {memory: {min: 1G, max: 2G}}}]",
      machine_with_gpus(1, 80 * kGiB));
  EXPECT_FALSE(p.instances[0].elastic_memory);
  EXPECT_EQ(p.instances[0].memory_cap_bytes, 80 * kGiB - 512 * kMiB);
}

}  // namespace
}  // namespace gpufrac
