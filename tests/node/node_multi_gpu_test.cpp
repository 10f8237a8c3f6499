// Nodes over several fake GPUs (2, 4 and 8: the fake NVML of fake_gpu_node.h, the fake MPS
// control daemon, fake engines): a spec over N GPUs places every model where its policy says
// (binpack fills GPUs in order, spread evens them out; gpus: auto, explicit lists of indexes and
// UUIDs, per-GPU modes), starts one MPS daemon per fractions GPU that holds a model — with that
// GPU's UUID and its own pipe and log directories — and none for the others, gives each model the
// limits and the daemon of its own GPU, routes a request to every model, and comes down clean:
// every engine and daemon gone, each daemon told to quit, also when `gpufrac down` runs after the
// node process was killed.
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/json.h"
#include "common/raw_http_exchange.h"
#include "fake_gpu_node.h"
#include "node/gpus.h"
#include "node/node.h"
#include "node/node_state.h"
#include "node/process.h"

namespace gpufrac {
namespace {

using testing::eventually;
using testing::fake_gpu_uuid;
using testing::fake_model;
using testing::proc_env;
using testing::read_file;

const bool kFakeDriver = testing::use_fake_driver(8);

// A fake engine's entry. The node checks each engine's health and then asks its GPU's (fake,
// Python) MPS daemon about its clients one engine at a time, so on a loaded machine the last of
// 16 engines may be checked well after it started: the startup timeout allows for that.
std::string model_entry(const std::string& name, const std::string& fraction) {
  return fake_model(name, fraction, "", 5, "120s");
}

// `count` models named m0, m1, ... with the same fraction.
std::string fake_models(int count, const std::string& fraction) {
  std::string models;
  for (int i = 0; i < count; ++i) models += model_entry("m" + std::to_string(i), fraction);
  return models;
}

ProcessId recorded(const Json& entry) {
  return {pid_t(entry.value("pid", 0)), entry.value("start_time", uint64_t(0))};
}

class MultiGpuNode : public testing::FakeGpuNode {
 protected:
  void gpus(int count) { ::setenv("FAKE_NVML_GPUS", std::to_string(count).c_str(), 1); }

  // The NVML index of the GPU each instance was placed on, by instance name.
  static std::map<std::string, int> gpu_of(const Node& node) {
    std::map<std::string, int> out;
    const Placement& p = node.placement();
    for (const PlacedInstance& i : p.instances)
      out[i.instance_name] = std::stoi(p.devices[i.device_index].id);
    return out;
  }

  // The GPUs whose MPS daemon the node started, as state.json records them; each must run with
  // that GPU's UUID, its own directories, and be the only daemon of that GPU.
  std::vector<int> daemon_gpus(const Node& node) {
    std::vector<int> out;
    std::set<std::string> pipes;
    Json state = node.state();
    for (const Json& d : state["mps"]) {
      int gpu = std::stoi(d["gpu"].get<std::string>());
      out.push_back(gpu);
      EXPECT_EQ(d["uuid"], fake_gpu_uuid(gpu));
      EXPECT_EQ(d["pipe_dir"], pipe_dir(gpu));
      EXPECT_EQ(d["log_dir"], log_dir(gpu));
      EXPECT_TRUE(pipes.insert(d["pipe_dir"].get<std::string>()).second) << d.dump();
      Json started = Json::parse(read_file(pipe_dir(gpu) + "/daemon.json"));
      EXPECT_EQ(started["CUDA_VISIBLE_DEVICES"], fake_gpu_uuid(gpu));
      EXPECT_EQ(started["CUDA_MPS_LOG_DIRECTORY"], log_dir(gpu));
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // A model on a fractions GPU is a client of that GPU's daemon, under its share.
  void expect_mps_client(const InstanceStatus& s, int gpu, const std::string& sm_percent) {
    pid_t pid = s.process.pid;
    EXPECT_EQ(proc_env(pid, "CUDA_VISIBLE_DEVICES"), fake_gpu_uuid(gpu)) << s.name;
    EXPECT_EQ(proc_env(pid, "CUDA_MPS_PIPE_DIRECTORY"), pipe_dir(gpu)) << s.name;
    EXPECT_EQ(proc_env(pid, "CUDA_MPS_LOG_DIRECTORY"), log_dir(gpu)) << s.name;
    EXPECT_EQ(proc_env(pid, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), sm_percent) << s.name;
  }

  // A model on a dedicated or timeslice GPU sees that GPU only and joins no MPS server.
  void expect_no_mps(const InstanceStatus& s, int gpu) {
    pid_t pid = s.process.pid;
    EXPECT_EQ(proc_env(pid, "CUDA_VISIBLE_DEVICES"), fake_gpu_uuid(gpu)) << s.name;
    EXPECT_EQ(proc_env(pid, "CUDA_MPS_PIPE_DIRECTORY"), run_dir() + "/mps/none") << s.name;
    EXPECT_EQ(proc_env(pid, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "<unset>") << s.name;
  }

  // One streamed request per model through the router, each answered by that model.
  static void expect_every_model_routed(const Node& node) {
    for (const InstanceStatus& s : node.instances()) {
      auto r = testing::stream_request(
          node.port(), "/v1/completions",
          R"({"model":")" + s.model + R"(","prompt":"x","max_tokens":2,"stream":true})");
      EXPECT_TRUE(r.complete && r.status == 200) << s.model << ": " << r.error << r.body;
      EXPECT_NE(r.body.find("\"model\":\"" + s.model + "\""), std::string::npos) << r.body;
    }
  }

  // Down, then nothing the node started runs, every daemon was told to quit, and no MPS process
  // serves a pipe directory of this node.
  void down_and_expect_nothing_left(Node& node, const std::vector<int>& daemon_gpus) {
    Json state = node.state();
    node.down();
    for (const Json& m : state["models"])
      EXPECT_FALSE(process_group_alive(recorded(m))) << m.dump();
    for (const Json& d : state["mps"]) EXPECT_FALSE(process_alive(recorded(d))) << d.dump();
    for (int gpu : daemon_gpus) EXPECT_EQ(commands(gpu).back(), "quit") << "GPU " << gpu;
    for (const MpsProcessSeen& m : discover_machine().mps) {
      EXPECT_EQ(m.pipe_dir.find(dir_.path()), std::string::npos)
          << "left running: " << m.kind << " " << m.pid;
    }
  }
};

class EveryGpuCount : public MultiGpuNode, public ::testing::WithParamInterface<int> {};

INSTANTIATE_TEST_SUITE_P(MultiGpuNode, EveryGpuCount, ::testing::Values(2, 4, 8),
                         [](const auto& info) { return std::to_string(info.param) + "Gpus"; });

// The study's shape on N GPUs: 2 models per GPU at half the SMs and half the memory each.
TEST_P(EveryGpuCount, FractionsTwoPerGpuOneDaemonPerGpuEveryModelRouted) {
  const int n = GetParam();
  gpus(n);
  std::unique_ptr<Node> node = Node::up(spec(fake_models(2 * n, "{compute: 0.5, memory: 0.5}")));
  std::vector<int> all(n);
  for (int g = 0; g < n; ++g) all[g] = g;
  EXPECT_EQ(daemon_gpus(*node), all);
  std::map<std::string, int> gpu = gpu_of(*node);
  std::vector<InstanceStatus> instances = node->instances();
  ASSERT_EQ(instances.size(), size_t(2 * n));
  for (int i = 0; i < 2 * n; ++i) {
    std::string name = "m" + std::to_string(i);
    EXPECT_EQ(gpu[name], i / 2) << name;  // binpack: two by two, in GPU order
    expect_mps_client(instance(instances, name), i / 2, "50");
    EXPECT_EQ(proc_env(instance(instances, name).process.pid, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"),
              "0=71373M");  // 143771 MiB / 2 - 512 MiB
  }
  expect_every_model_routed(*node);
  // Each daemon was asked about its own clients (the fail-closed check), two per GPU.
  for (int g = 0; g < n; ++g) {
    std::vector<std::string> told = commands(g);
    EXPECT_GE(std::count(told.begin(), told.end(), "get_server_list"), 2) << "GPU " << g;
  }
  down_and_expect_nothing_left(*node, all);
}

// Small models: spread puts one per GPU round the GPUs; binpack fills GPU 0, then GPU 1, and a
// GPU that holds no model gets no daemon.
TEST_P(EveryGpuCount, SpreadEvensOutTheGpusBinpackFillsThemInOrder) {
  const int n = GetParam();
  gpus(n);
  std::string models = fake_models(2 * n, "{compute: 0.25, memory: 0.25}");
  std::unique_ptr<Node> spread = Node::up(spec(models, "placement: spread\n"));
  std::map<std::string, int> gpu = gpu_of(*spread);
  for (int i = 0; i < 2 * n; ++i) EXPECT_EQ(gpu["m" + std::to_string(i)], i % n) << i;
  EXPECT_EQ(daemon_gpus(*spread).size(), size_t(n));
  expect_every_model_routed(*spread);
  std::vector<int> spread_daemons = daemon_gpus(*spread);
  down_and_expect_nothing_left(*spread, spread_daemons);
  std::filesystem::remove_all(run_dir());

  std::unique_ptr<Node> binpack = Node::up(spec(models, "placement: binpack\n"));
  gpu = gpu_of(*binpack);
  for (int i = 0; i < 2 * n; ++i) EXPECT_EQ(gpu["m" + std::to_string(i)], i / 4) << i;
  std::vector<int> used;
  for (int g = 0; g < (2 * n + 3) / 4; ++g) used.push_back(g);
  EXPECT_EQ(daemon_gpus(*binpack), used);
  for (int g = int(used.size()); g < n; ++g) {
    EXPECT_FALSE(std::filesystem::exists(run_dir() + "/mps/gpu" + std::to_string(g))) << g;
  }
  expect_every_model_routed(*binpack);
  down_and_expect_nothing_left(*binpack, used);
}

TEST_P(EveryGpuCount, TimesliceAndDedicatedRunNoDaemonAndOneGpuPerDedicatedModel) {
  const int n = GetParam();
  gpus(n);
  std::unique_ptr<Node> timeslice = Node::up(spec(
      fake_models(2 * n, "{memory: 0.5}"), "mode: timeslice\nmemcap_library: " MEMCAP_SHIM "\n"));
  EXPECT_TRUE(timeslice->state()["mps"].empty());
  std::vector<InstanceStatus> instances = timeslice->instances();
  for (int i = 0; i < 2 * n; ++i) {
    const InstanceStatus& s = instance(instances, "m" + std::to_string(i));
    expect_no_mps(s, i / 2);
    EXPECT_NE(proc_env(s.process.pid, "LD_PRELOAD").find("libgpufrac_memcap.so"),
              std::string::npos);
  }
  expect_every_model_routed(*timeslice);
  down_and_expect_nothing_left(*timeslice, {});
  std::filesystem::remove_all(run_dir());

  std::unique_ptr<Node> dedicated =
      Node::up(spec(fake_models(n, "{compute: 1, memory: 1}"), "mode: dedicated\n"));
  EXPECT_TRUE(dedicated->state()["mps"].empty());
  instances = dedicated->instances();
  for (int i = 0; i < n; ++i) {
    const InstanceStatus& s = instance(instances, "m" + std::to_string(i));
    expect_no_mps(s, i);
    EXPECT_EQ(proc_env(s.process.pid, "LD_PRELOAD").find("libgpufrac_memcap.so"),
              std::string::npos);
  }
  expect_every_model_routed(*dedicated);
  down_and_expect_nothing_left(*dedicated, {});

  // One model more than GPUs: refused, and nothing starts.
  std::filesystem::remove_all(run_dir());
  try {
    Node::up(spec(fake_models(n + 1, "{compute: 1, memory: 1}"), "mode: dedicated\n"));
    ADD_FAILURE() << "a dedicated node with more models than GPUs came up";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("dedicated and already holds a model"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(run_dir() + "/state.json"));
}

// An explicit list by index and UUID, each GPU with its own mode: daemons for the fractions GPUs
// only, each model under its own GPU's mode.
TEST_F(MultiGpuNode, PerGpuModesFromAnExplicitListOfIndexesAndUuids) {
  gpus(4);
  std::string list = "gpus: [{gpu: 0, mode: dedicated}, {gpu: " + fake_gpu_uuid(1) +
                     ", mode: timeslice}, {gpu: " + fake_gpu_uuid(2) + ", mode: fractions}, 3]\n";
  std::unique_ptr<Node> node = Node::up(spec(fake_models(7, "{compute: 0.5, memory: 0.5}"),
                                             list + "memcap_library: " MEMCAP_SHIM "\n"));
  // binpack, equal models: m0 takes the dedicated GPU 0, m1-m2 share GPU 1 time-sliced, m3-m4
  // GPU 2 and m5-m6 GPU 3 (fractions, the spec's mode) under MPS.
  std::map<std::string, int> gpu = gpu_of(*node);
  const int expected[] = {0, 1, 1, 2, 2, 3, 3};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(gpu["m" + std::to_string(i)], expected[i]) << i;
  EXPECT_EQ(daemon_gpus(*node), (std::vector<int>{2, 3}));
  std::vector<InstanceStatus> instances = node->instances();
  expect_no_mps(instance(instances, "m0"), 0);
  EXPECT_EQ(proc_env(instance(instances, "m0").process.pid, "GPUFRAC_MEMCAP_BYTES"), "<unset>");
  for (const char* name : {"m1", "m2"}) {
    expect_no_mps(instance(instances, name), 1);
    EXPECT_EQ(proc_env(instance(instances, name).process.pid, "GPUFRAC_MEMCAP_BYTES"),
              std::to_string((uint64_t(143771) << 20) / 2 - (uint64_t(512) << 20)));
  }
  for (int i = 3; i < 7; ++i)
    expect_mps_client(instance(instances, "m" + std::to_string(i)), expected[i], "50");
  expect_every_model_routed(*node);
  down_and_expect_nothing_left(*node, {2, 3});
}

// A subset of the machine's GPUs: the node names them by their NVML index and UUID.
TEST_F(MultiGpuNode, AListOfSomeGpusUsesThoseAndOnlyThose) {
  gpus(8);
  std::unique_ptr<Node> node =
      Node::up(spec(fake_models(4, "{compute: 0.5, memory: 0.5}"), "gpus: [5, 7]\n"));
  EXPECT_EQ(daemon_gpus(*node), (std::vector<int>{5, 7}));
  std::vector<InstanceStatus> instances = node->instances();
  for (int i = 0; i < 4; ++i)
    expect_mps_client(instance(instances, "m" + std::to_string(i)), i < 2 ? 5 : 7, "50");
  EXPECT_EQ(node->state()["devices"].size(), 2u);
  expect_every_model_routed(*node);
  down_and_expect_nothing_left(*node, {5, 7});
}

// Models pinned with `gpu` (by index and by UUID) run there, the others where placement puts
// them; `gpufrac status` shows every model's GPU, in its table and in --json.
TEST_F(MultiGpuNode, PinnedModelsRunOnTheirGpuAndStatusShowsEachModelsGpu) {
  const char* bin = std::getenv("GPUFRAC_BIN");
  ASSERT_NE(bin, nullptr);
  gpus(4);
  const std::string half = "{compute: 0.5, memory: 0.5}";
  std::string models = model_entry("m0", half) + "    gpu: 3\n" + model_entry("m1", half) +
                       "    gpu: " + fake_gpu_uuid(3) + "\n";
  for (int i = 2; i < 8; ++i) models += model_entry("m" + std::to_string(i), half);  // placed
  std::string path = dir_.path() + "/node.yaml";
  testing::write_file(path, spec_yaml(models, "mode: fractions\n"));
  CommandOutput up = run_command({bin, "up", path, "--detach"}, current_environment(), "", 120);
  ASSERT_TRUE(up.ok()) << up.out << up.err;
  // binpack after the pinned pair: m2-m3 on GPU 0, m4-m5 on GPU 1, m6-m7 on GPU 2.
  const int expected[] = {3, 3, 0, 0, 1, 1, 2, 2};
  Json state = read_node_state(run_dir());
  for (const Json& m : state["models"]) {
    int i = std::stoi(m["name"].get<std::string>().substr(1));
    EXPECT_EQ(proc_env(pid_t(m["pid"].get<int>()), "CUDA_VISIBLE_DEVICES"),
              fake_gpu_uuid(expected[i]))
        << m.dump();
    EXPECT_EQ(proc_env(pid_t(m["pid"].get<int>()), "CUDA_MPS_PIPE_DIRECTORY"),
              pipe_dir(expected[i]))
        << m.dump();
  }

  CommandOutput table =
      run_command({bin, "status", "--run-dir", run_dir()}, current_environment(), "", 30);
  ASSERT_TRUE(table.ok()) << table.err;
  std::map<std::string, std::string> gpu_column;
  std::istringstream lines(table.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream cells(line);
    std::string name, gpu, mode;
    cells >> name >> gpu >> mode;
    if (name.size() == 2 && name[0] == 'm') {
      gpu_column[name] = gpu;
      EXPECT_EQ(mode, "fractions") << line;
    }
  }
  CommandOutput json =
      run_command({bin, "status", "--run-dir", run_dir(), "--json"}, current_environment(), "", 30);
  ASSERT_TRUE(json.ok()) << json.err;
  Json listed = Json::parse(json.out);
  ASSERT_EQ(gpu_column.size(), 8u) << table.out;
  ASSERT_EQ(listed["models"].size(), 8u);
  for (const Json& m : listed["models"]) {
    std::string name = m["name"].get<std::string>();
    std::string gpu = std::to_string(expected[std::stoi(name.substr(1))]);
    EXPECT_EQ(gpu_column[name], gpu) << table.out;
    EXPECT_EQ(m["gpu"], gpu) << m.dump();
    EXPECT_EQ(m["gpu_uuid"], fake_gpu_uuid(std::stoi(gpu))) << m.dump();
  }
  CommandOutput down =
      run_command({bin, "down", "--run-dir", run_dir()}, current_environment(), "", 120);
  ASSERT_TRUE(down.ok()) << down.out << down.err;
  for (const Json& m : state["models"]) EXPECT_FALSE(process_group_alive(recorded(m))) << m.dump();
  for (int g = 0; g < 4; ++g) EXPECT_EQ(commands(g).back(), "quit") << "GPU " << g;
}

// `gpufrac up --detach` over 4 GPUs, the node process killed: `gpufrac down` stops every engine
// and quits every GPU's daemon from what state.json recorded.
TEST_F(MultiGpuNode, DownAfterAKilledNodeQuitsTheDaemonOfEveryGpu) {
  const char* bin = std::getenv("GPUFRAC_BIN");
  ASSERT_NE(bin, nullptr);
  gpus(4);
  std::string path = dir_.path() + "/node.yaml";
  testing::write_file(
      path, spec_yaml(fake_models(8, "{compute: 0.5, memory: 0.5}"), "mode: fractions\n"));
  CommandOutput up = run_command({bin, "up", path, "--detach"}, current_environment(), "", 120);
  ASSERT_TRUE(up.ok()) << up.out << up.err;
  Json state = read_node_state(run_dir());
  ASSERT_EQ(state["mps"].size(), 4u);
  ASSERT_EQ(state["models"].size(), 8u);
  ::kill(recorded(state["node"]).pid, SIGKILL);
  ASSERT_TRUE(eventually([&] { return !process_alive(recorded(state["node"])); }, 5));
  for (const Json& d : state["mps"])
    EXPECT_TRUE(process_alive(recorded(d))) << d.dump();  // orphans

  CommandOutput down =
      run_command({bin, "down", "--run-dir", run_dir()}, current_environment(), "", 120);
  ASSERT_TRUE(down.ok()) << down.out << down.err;
  EXPECT_NE(down.out.find("12 leftover"), std::string::npos) << down.out;  // 8 engines, 4 daemons
  for (const Json& m : state["models"]) EXPECT_FALSE(process_group_alive(recorded(m))) << m.dump();
  for (const Json& d : state["mps"]) EXPECT_FALSE(process_alive(recorded(d))) << d.dump();
  for (int g = 0; g < 4; ++g) EXPECT_EQ(commands(g).back(), "quit") << "GPU " << g;
}

}  // namespace
}  // namespace gpufrac
