// Launch plans: the command line and the environment (limits) a model gets in each sharing mode.
#include "node/model_launch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/error.h"

namespace gpufrac {
namespace {

constexpr uint64_t kGiB = uint64_t(1) << 30;

std::string env_value(const LaunchPlan& plan, const std::string& name) {
  for (const std::string& entry : plan.env) {
    if (entry.rfind(name + "=", 0) == 0) return entry.substr(name.size() + 1);
  }
  return "<unset>";
}

PlacementDevice gpu(SharingMode mode) {
  PlacementDevice d;
  d.id = "3";
  d.uuid = "GPU-abc";
  d.name = "H200";
  d.memory_bytes = 140 * kGiB;
  d.mode = mode;
  return d;
}

PlacementDevice cpu_device(SharingMode mode, int cores = 2) {
  PlacementDevice cpu;
  cpu.id = "cpu";
  cpu.name = "CPU";
  cpu.memory_bytes = 16 * kGiB;
  for (int core = 0; core < cores; ++core) cpu.cpus.push_back(core);
  cpu.sm_count = cores;
  cpu.mode = mode;
  return cpu;
}

struct Fixture {
  NodeSpec spec;
  Placement placement;
  LaunchContext context;
  LaunchPlan plan(int port = 9001) { return plan_launch(spec, placement, placement.instances[0], port, context); }
};

Fixture fixture(const std::string& yaml, PlacementDevice device) {
  Fixture f;
  f.spec = parse_node_spec(yaml, "spec.yaml");
  f.placement = place_models(f.spec, {device});
  f.context.gpufrac_binary = "/opt/gpufrac/gpufrac";
  f.context.memcap_library = "/opt/gpufrac/libgpufrac_memcap.so";
  f.context.run_dir = "/run/n";
  f.context.mps_client_env = {{{"CUDA_MPS_PIPE_DIRECTORY", "/run/n/mps/gpu3/pipe"},
                               {"CUDA_MPS_LOG_DIRECTORY", "/run/n/mps/gpu3/log"}}};
  return f;
}

TEST(ModelLaunch, FractionsGetMpsLimitsAndTheShim) {
  ::setenv("CUDA_MPS_PIPE_DIRECTORY", "/tmp/someone-elses", 1);  // never inherited
  Fixture f = fixture(R"(
name: n
models:
  - name: a
    model: qwen3-4b
    engine_args: {max-num-seqs: 32, enforce-eager: true}
    fraction: {compute: 0.5, memory: 0.5}
    env: {EXTRA: "1"}
)", gpu(SharingMode::kFractions));
  LaunchPlan plan = f.plan();
  ::unsetenv("CUDA_MPS_PIPE_DIRECTORY");
  EXPECT_EQ(plan.argv, (std::vector<std::string>{"/opt/gpufrac/gpufrac", "serve", "--model", "qwen3-4b",
                                                 "--device", "cuda", "--host", "127.0.0.1", "--port",
                                                 "9001", "--served-model-name", "a", "--max-num-seqs", "32",
                                                 "--enforce-eager"}));
  EXPECT_EQ(env_value(plan, "CUDA_VISIBLE_DEVICES"), "GPU-abc");
  EXPECT_EQ(env_value(plan, "CUDA_MPS_PIPE_DIRECTORY"), "/run/n/mps/gpu3/pipe");
  EXPECT_EQ(env_value(plan, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "50");
  // 0.5 * 140 GiB - 512 MiB = 71168 MiB
  EXPECT_EQ(env_value(plan, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=71168M");
  EXPECT_EQ(env_value(plan, "LD_PRELOAD").rfind("/opt/gpufrac/libgpufrac_memcap.so", 0), 0u);
  EXPECT_EQ(env_value(plan, memcap::kEnvBytes), std::to_string(uint64_t(71168) << 20));
  EXPECT_EQ(env_value(plan, memcap::kEnvTenant), "n.a");
  EXPECT_EQ(env_value(plan, memcap::kEnvStateDir), "/run/n/memcap");
  EXPECT_EQ(env_value(plan, "GPUFRAC_NODE_SM_PERCENT"), "50");
  EXPECT_EQ(env_value(plan, "EXTRA"), "1");
  EXPECT_EQ(plan.log_path, "/run/n/logs/a.log");
  EXPECT_EQ(plan.health_url, "http://127.0.0.1:9001/health");
  EXPECT_TRUE(plan.cpus.empty());
  EXPECT_EQ(plan.data_limit_bytes, 0u);
}

TEST(ModelLaunch, FractionsWithoutTheShimUseMpsAlone) {
  Fixture f = fixture("models: [{name: a, model: tiny, fraction: {compute: 0.25, memory: 20G}}]",
                      gpu(SharingMode::kFractions));
  f.context.memcap_library.clear();
  LaunchPlan plan = f.plan();
  EXPECT_EQ(env_value(plan, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=20480M");
  EXPECT_EQ(env_value(plan, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
  EXPECT_EQ(env_value(plan, memcap::kEnvBytes), "<unset>");
}

TEST(ModelLaunch, TimesliceIsCappedByTheShimOnlyAndNeedsIt) {
  Fixture f = fixture("mode: timeslice\nmodels: [{name: a, model: tiny, fraction: {memory: 20G}}]",
                      gpu(SharingMode::kTimeslice));
  LaunchPlan plan = f.plan();
  EXPECT_EQ(env_value(plan, memcap::kEnvBytes), std::to_string(20 * kGiB));
  EXPECT_EQ(env_value(plan, "CUDA_MPS_PIPE_DIRECTORY"), "/run/n/mps/none");  // never the default daemon
  EXPECT_EQ(env_value(plan, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "<unset>");
  f.context.memcap_library.clear();
  try {
    f.plan();
    FAIL() << "timeslice without the shim was planned";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("memcap_library"), std::string::npos) << e.what();
  }
}

TEST(ModelLaunch, DedicatedGetsOnlyItsGpu) {
  Fixture f = fixture("mode: dedicated\nmodels: [{name: a, model: tiny}]", gpu(SharingMode::kDedicated));
  LaunchPlan plan = f.plan();
  EXPECT_EQ(env_value(plan, "CUDA_VISIBLE_DEVICES"), "GPU-abc");
  EXPECT_EQ(env_value(plan, "LD_PRELOAD").find("memcap"), std::string::npos);
  EXPECT_EQ(env_value(plan, "CUDA_MPS_PIPE_DIRECTORY"), "/run/n/mps/none");
}

// The node's internal key reaches the engine in its environment only, under both engines'
// variables; inherited keys and the variables holding the router's keys never do.
TEST(ModelLaunch, TheEngineKeyIsInTheEnvironmentAndClientKeysAreNot) {
  ::setenv("GPUFRAC_API_KEY", "inherited", 1);
  ::setenv("VLLM_API_KEY", "inherited", 1);
  ::setenv("TEAM_KEYS", "client-key", 1);
  Fixture f = fixture("mode: dedicated\nmodels: [{name: a, model: tiny, api_keys_env: TEAM_KEYS}]",
                      gpu(SharingMode::kDedicated));
  LaunchPlan without = f.plan();
  f.context.engine_key = "node-key";
  f.context.withheld_variables = {"TEAM_KEYS"};
  LaunchPlan plan = f.plan();
  ::unsetenv("GPUFRAC_API_KEY");
  ::unsetenv("VLLM_API_KEY");
  ::unsetenv("TEAM_KEYS");
  EXPECT_EQ(env_value(plan, "GPUFRAC_API_KEY"), "node-key");
  EXPECT_EQ(env_value(plan, "VLLM_API_KEY"), "node-key");
  EXPECT_EQ(env_value(plan, "TEAM_KEYS"), "<unset>");
  EXPECT_EQ(plan.engine_key, "node-key");
  for (const std::string& arg : plan.argv) EXPECT_EQ(arg.find("node-key"), std::string::npos);
  EXPECT_EQ(env_value(without, "GPUFRAC_API_KEY"), "<unset>");
  EXPECT_EQ(env_value(without, "VLLM_API_KEY"), "<unset>");
  EXPECT_EQ(without.engine_key, "");
}

TEST(ModelLaunch, CpuFractionsArePinnedAndLimited) {
  Fixture f = fixture("models: [{name: a, model: tiny, fraction: {compute: 0.5, memory: 0.25}}]",
                      cpu_device(SharingMode::kFractions, 4));
  LaunchPlan plan = f.plan();
  EXPECT_EQ(plan.cpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(plan.data_limit_bytes, 4 * kGiB - (uint64_t(512) << 20));
  EXPECT_EQ(env_value(plan, "CUDA_VISIBLE_DEVICES"), "");
  EXPECT_EQ(env_value(plan, "OMP_NUM_THREADS"), "2");
  EXPECT_EQ(plan.argv[5], "cpu");
}

bool has_flag(const LaunchPlan& plan, const std::string& flag, const std::string& value) {
  auto it = std::find(plan.argv.begin(), plan.argv.end(), flag);
  return it != plan.argv.end() && it + 1 != plan.argv.end() && it[1] == value;
}

int flag_count(const LaunchPlan& plan, const std::string& flag) {
  return int(std::count(plan.argv.begin(), plan.argv.end(), flag));
}

// Elastic memory: the ceiling is the shim's cap and MPS's pinned limit, the floor and the GPU's
// pool (its memory less the reserves and the static caps) go to the shim, and the built-in engine
// maps its KV cache on demand.
TEST(ModelLaunch, ElasticMemoryGivesTheShimAFloorACeilingAndThePool) {
  Fixture f = fixture(R"(
name: n
models:
  - {name: e, model: tiny, fraction: {compute: 0.5, memory: {min: 9G, max: 40G}}}
  - {name: s, model: tiny, fraction: {compute: 0.5, memory: 0.25}}
)", gpu(SharingMode::kFractions));
  LaunchPlan plan = f.plan();
  EXPECT_EQ(env_value(plan, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=40960M");
  EXPECT_EQ(env_value(plan, memcap::kEnvBytes), std::to_string(40 * kGiB));
  EXPECT_EQ(env_value(plan, memcap::kEnvFloorBytes), std::to_string(9 * kGiB));
  uint64_t static_cap = 35 * kGiB - (uint64_t(512) << 20);
  EXPECT_EQ(env_value(plan, memcap::kEnvPoolBytes),
            std::to_string(140 * kGiB - 2 * (uint64_t(512) << 20) - static_cap));
  EXPECT_EQ(env_value(plan, "GPUFRAC_NODE_MEMORY_BYTES"), std::to_string(40 * kGiB));
  EXPECT_EQ(env_value(plan, "GPUFRAC_NODE_MEMORY_FLOOR_BYTES"), std::to_string(9 * kGiB));
  EXPECT_TRUE(has_flag(plan, "--memory-budget", "elastic"));
  // The GPU's elastic engines map KV memory in turns on one file per GPU.
  EXPECT_TRUE(has_flag(plan, "--kv-map-lock", "/run/n/kv-map-gpu3.lock"));

  LaunchPlan static_plan = plan_launch(f.spec, f.placement, f.placement.instances[1], 9002, f.context);
  EXPECT_EQ(env_value(static_plan, memcap::kEnvFloorBytes), "<unset>");
  EXPECT_EQ(env_value(static_plan, memcap::kEnvPoolBytes), "<unset>");
  EXPECT_EQ(env_value(static_plan, "GPUFRAC_NODE_MEMORY_FLOOR_BYTES"), "<unset>");
  EXPECT_EQ(flag_count(static_plan, "--memory-budget"), 0);
  EXPECT_EQ(flag_count(static_plan, "--kv-map-lock"), 0);
}

TEST(ModelLaunch, ElasticMemoryKeepsTheEnginesOwnBudgetAndNeedsTheShim) {
  Fixture f = fixture(R"(
mode: timeslice
models:
  - {name: e, model: tiny, engine_args: {memory-budget: 4G}, fraction: {memory: {min: 1G, max: 8G}}}
)", gpu(SharingMode::kTimeslice));
  LaunchPlan plan = f.plan();
  EXPECT_EQ(flag_count(plan, "--memory-budget"), 1);
  EXPECT_EQ(plan.argv.back(), "4G");
  EXPECT_EQ(flag_count(plan, "--kv-map-lock"), 0);  // its KV is not elastic: nothing to map
  EXPECT_EQ(env_value(plan, memcap::kEnvFloorBytes), std::to_string(kGiB));
  EXPECT_EQ(env_value(plan, memcap::kEnvPoolBytes),
            std::to_string(140 * kGiB - (uint64_t(512) << 20)));

  Fixture fractions = fixture(
      "models: [{name: e, model: tiny, fraction: {compute: 1, memory: {min: 1G, max: 8G}}}]",
      gpu(SharingMode::kFractions));
  fractions.context.memcap_library.clear();
  try {
    fractions.plan();
    FAIL() << "elastic memory without the shim was planned";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("memcap_library: models[0].fraction.memory {min, max}"),
              std::string::npos)
        << e.what();
  }
}

TEST(ModelLaunch, ElasticMemoryOnTheCpuIsLimitedByItsCeiling) {
  Fixture f = fixture(
      "models: [{name: a, model: tiny, fraction: {compute: 0.5, memory: {min: 1G, max: 4G}}}]",
      cpu_device(SharingMode::kFractions));
  LaunchPlan plan = f.plan();
  EXPECT_EQ(plan.data_limit_bytes, 4 * kGiB);
  EXPECT_EQ(plan.argv.back(), "elastic");
  EXPECT_EQ(flag_count(plan, "--kv-map-lock"), 0);  // the CPU's elastic KV is never refused
  EXPECT_EQ(env_value(plan, memcap::kEnvPoolBytes), "<unset>");
}

TEST(ModelLaunch, CpuTimesliceTakesTurnsOnOneLockFile) {
  Fixture f = fixture("models: [{name: a, model: tiny, fraction: {memory: 0.25}}, "
                      "{name: b, model: tiny, fraction: {memory: 0.25}}]",
                      cpu_device(SharingMode::kTimeslice));
  for (const PlacedInstance& instance : f.placement.instances) {
    LaunchPlan plan = plan_launch(f.spec, f.placement, instance, 9001, f.context);
    EXPECT_TRUE(has_flag(plan, "--cpu-turn-lock", "/run/n/cpu-turns.lock"));
    EXPECT_TRUE(plan.cpus.empty());  // every model may use every core, one step at a time
  }
}

TEST(ModelLaunch, OnlyCpuTimesliceTakesTurns) {
  Fixture fractions = fixture("models: [{name: a, model: tiny, fraction: {compute: 0.5, memory: 0.25}}]",
                              cpu_device(SharingMode::kFractions));
  EXPECT_EQ(flag_count(fractions.plan(), "--cpu-turn-lock"), 0);
  Fixture dedicated = fixture("models: [{name: a, model: tiny}]", cpu_device(SharingMode::kDedicated));
  EXPECT_EQ(flag_count(dedicated.plan(), "--cpu-turn-lock"), 0);
  Fixture gpu_timeslice = fixture("models: [{name: a, model: tiny, fraction: {memory: 0.25}}]",
                                  gpu(SharingMode::kTimeslice));
  EXPECT_EQ(flag_count(gpu_timeslice.plan(), "--cpu-turn-lock"), 0);
}

TEST(ModelLaunch, CpuTimesliceKeepsATurnLockOfEngineArgs) {
  Fixture f = fixture("models: [{name: a, model: tiny, engine_args: {cpu-turn-lock: /tmp/mine}, "
                      "fraction: {memory: 0.25}}]",
                      cpu_device(SharingMode::kTimeslice));
  LaunchPlan plan = f.plan();
  EXPECT_EQ(flag_count(plan, "--cpu-turn-lock"), 1);
  EXPECT_TRUE(has_flag(plan, "--cpu-turn-lock", "/tmp/mine"));
}

TEST(ModelLaunch, CommandPlaceholders) {
  Fixture f = fixture(R"(
models:
  - name: org/m
    command: vllm serve X --port {port} --gpu-memory-utilization {gpu_memory_utilization} --served-model-name {name} --x {gpu}/{gpu_uuid}/{memory_bytes}
    fraction: {compute: 0.5, memory: 0.4}
)", gpu(SharingMode::kFractions));
  LaunchPlan plan = f.plan(7000);
  ASSERT_EQ(plan.argv.size(), 3u);
  EXPECT_EQ(plan.argv[0], "/bin/sh");
  uint64_t cap = uint64_t(0.4 * double(140 * kGiB)) - (uint64_t(512) << 20);
  EXPECT_EQ(plan.argv[2], "exec vllm serve X --port 7000 --gpu-memory-utilization 0.3964 "
                          "--served-model-name org/m --x 3/GPU-abc/" + std::to_string(cap));
  EXPECT_EQ(plan.log_path, "/run/n/logs/org_m.log");
  // Shell syntax is left to the shell (no exec), JSON braces are not placeholders.
  EXPECT_EQ(expand_placeholders("env > f; srv --port {port} --json '{\"a\": 1}'", {{"port", "1"}}, "c"),
            "env > f; srv --port 1 --json '{\"a\": 1}'");
  EXPECT_THROW(expand_placeholders("srv --port {prot}", {{"port", "1"}}, "c"), UsageError);
}

TEST(ModelLaunch, MemcapLibraryIsFoundBesideTheBinary) {
  NodeSpec spec = parse_node_spec("models: [{name: a, model: tiny}]", "s");
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "gfn-memcap-find";
  std::filesystem::create_directories(dir);
  EXPECT_EQ(find_memcap_library(spec, (dir / "gpufrac").string()), "");
  std::ofstream((dir / kMemcapLibraryName).string()) << "x";
  EXPECT_EQ(find_memcap_library(spec, (dir / "gpufrac").string()), (dir / kMemcapLibraryName).string());
  spec.memcap_library = "/nonexistent/libgpufrac_memcap.so";
  EXPECT_THROW(find_memcap_library(spec, (dir / "gpufrac").string()), UsageError);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpufrac
