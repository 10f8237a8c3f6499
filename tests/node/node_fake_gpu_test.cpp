// Nodes on fake GPUs: a fake NVML (tests/fakes/fake_nvml_node.cpp) supplies the GPUs and the fake
// nvidia-cuda-mps-control (tests/fakes/fake_mps_control.py) the MPS daemon, whose clients are the
// processes whose environment points at its pipe directory. Checks: one daemon per fractions GPU
// with that GPU's UUID and its own directories, each model's MPS limits, the fail-closed check,
// co-tenant restarts on a fault, and no daemon left after down.
#include <signal.h>

#include <cstdlib>

#include "common/error.h"
#include "common/json.h"
#include "node/gpus.h"
#include "node/node.h"
#include "node/node_state.h"
#include "node/process.h"
#include "fake_gpu_node.h"
#include "common/raw_http_exchange.h"

namespace gpufrac {
namespace {

using testing::eventually;
using testing::fake_model;
using testing::proc_env;
using testing::read_file;

const bool kFakeDriver = testing::use_fake_driver(2);

const std::string kGpu0 = testing::fake_gpu_uuid(0);
const std::string kGpu1 = testing::fake_gpu_uuid(1);

using FakeGpuNodeTest = testing::FakeGpuNode;

TEST_F(FakeGpuNodeTest, TheFakeDriverShowsItsGpus) {
  MachineInventory machine = discover_machine();
  ASSERT_TRUE(machine.nvml_loaded) << machine.nvml_status;
  ASSERT_EQ(machine.gpus.size(), 2u);
  EXPECT_EQ(machine.gpus[1].uuid, kGpu1);
  EXPECT_EQ(machine.gpus[0].sm_count, 132);
  EXPECT_EQ(machine.gpus[0].memory_total, uint64_t(143771) << 20);
  EXPECT_EQ(machine.gpus[0].mig_mode, "disabled");
  EXPECT_EQ(machine.driver_version, "999.99-fake");
}

TEST_F(FakeGpuNodeTest, FractionsRunOneMpsDaemonPerGpuAndEveryModelAttachesUnderItsLimits) {
  std::unique_ptr<Node> node = Node::up(spec(fake_model("a", "{compute: 0.5, memory: 0.5}") +
                                             fake_model("b", "{compute: 0.5, memory: 0.5}") +
                                             fake_model("c", "{compute: 0.25, memory: 20G}"),
                                             "placement: binpack\n"));
  std::vector<InstanceStatus> all = node->instances();
  // binpack: c (the smallest) no longer fits GPU 0 after a and b, so it goes to GPU 1.
  Json state = node->state();
  ASSERT_EQ(state["mps"].size(), 2u);
  for (int gpu : {0, 1}) {
    Json daemon = Json::parse(read_file(pipe_dir(gpu) + "/daemon.json"));
    EXPECT_EQ(daemon["CUDA_VISIBLE_DEVICES"], gpu == 0 ? kGpu0 : kGpu1);
    EXPECT_EQ(daemon["CUDA_MPS_LOG_DIRECTORY"], dir_.path() + "/run/mps/gpu" + std::to_string(gpu) + "/log");
  }
  for (const char* name : {"a", "b"}) {
    pid_t pid = instance(all, name).process.pid;
    EXPECT_EQ(proc_env(pid, "CUDA_VISIBLE_DEVICES"), kGpu0) << name;
    EXPECT_EQ(proc_env(pid, "CUDA_MPS_PIPE_DIRECTORY"), pipe_dir(0)) << name;
    EXPECT_EQ(proc_env(pid, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "50") << name;
    EXPECT_EQ(proc_env(pid, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=71373M") << name;  // 143771/2 - 512
  }
  pid_t c = instance(all, "c").process.pid;
  EXPECT_EQ(proc_env(c, "CUDA_VISIBLE_DEVICES"), kGpu1);
  EXPECT_EQ(proc_env(c, "CUDA_MPS_PIPE_DIRECTORY"), pipe_dir(1));
  EXPECT_EQ(proc_env(c, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
  EXPECT_EQ(proc_env(c, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=20480M");
  // The node asked each daemon who its clients are (the fail-closed check).
  std::vector<std::string> told = commands(0);
  EXPECT_NE(std::find(told.begin(), told.end(), "get_server_list"), told.end());
  EXPECT_TRUE(std::any_of(told.begin(), told.end(), [](const std::string& l) {
    return l.rfind("get_device_client_list ", 0) == 0;
  }));
  // Requests flow through the router to the MPS clients.
  auto r = testing::stream_request(node->port(), "/v1/completions",
                                   R"({"model":"c","prompt":"x","max_tokens":3,"stream":true})");
  EXPECT_TRUE(r.complete && r.status == 200) << r.error << r.body;

  std::vector<ProcessId> daemons;
  for (const Json& d : state["mps"]) daemons.push_back({pid_t(d["pid"].get<int>()), d["start_time"].get<uint64_t>()});
  node->down();
  for (const ProcessId& d : daemons) EXPECT_FALSE(process_alive(d));
  for (const InstanceStatus& s : all) EXPECT_FALSE(process_group_alive(s.process)) << s.name;
  EXPECT_EQ(commands(0).back(), "quit");
  EXPECT_EQ(commands(1).back(), "quit");
  for (const MpsProcessSeen& m : discover_machine().mps) {
    EXPECT_EQ(m.pipe_dir.find(dir_.path()), std::string::npos) << "left running: MPS " << m.kind << " " << m.pid;
  }
}

TEST_F(FakeGpuNodeTest, AModelThatIsNotAnMpsClientTakesTheNodeDown) {
  // b drops the pipe directory from its environment: on a real GPU it would run uncapped.
  NodeSpec s = spec(fake_model("a", "{compute: 0.5, memory: 0.5}") +
                    fake_model("b", "{compute: 0.5, memory: 0.5}", "env -u CUDA_MPS_PIPE_DIRECTORY "));
  try {
    Node::up(s);
    FAIL() << "a node with an unattached MPS client came up";
  } catch (const RuntimeFailure& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("model 'b'"), std::string::npos) << message;
    EXPECT_NE(message.find("not an MPS client"), std::string::npos) << message;
  }
  Json state = read_node_state(dir_.path() + "/run");
  EXPECT_EQ(state["state"], "failed");
  for (const Json& m : state["models"]) {
    EXPECT_FALSE(process_group_alive({pid_t(m.value("pid", 0)), m.value("start_time", uint64_t(0))})) << m.dump();
  }
  ASSERT_EQ(state["mps"].size(), 1u);
  EXPECT_FALSE(process_alive({pid_t(state["mps"][0]["pid"].get<int>()), state["mps"][0]["start_time"].get<uint64_t>()}));
  EXPECT_EQ(commands(0).back(), "quit");
}

TEST_F(FakeGpuNodeTest, ACrashRestartsEveryMpsClientOfItsGpuAKillOnlyItself) {
  std::unique_ptr<Node> node = Node::up(spec(fake_model("a", "{compute: 0.5, memory: 0.4}") +
                                             fake_model("b", "{compute: 0.5, memory: 0.4}") +
                                             fake_model("other", "{compute: 1, memory: 0.4}"),
                                             "gpus: [0, 1]\n"));
  auto all = node->instances();
  ASSERT_EQ(node->placement().instances[2].device_index, 1u);
  ProcessId b_before = instance(all, "b").process;
  // A crash (SIGSEGV, as a CUDA fatal error ends an engine) may be a GPU fault that poisoned
  // every client of GPU 0: both restart; the model on GPU 1 is untouched.
  ::kill(instance(all, "a").process.pid, SIGSEGV);
  ASSERT_TRUE(eventually([&] {
    all = node->instances();
    return instance(all, "a").restarts == 1 && instance(all, "b").restarts == 1 &&
           instance(all, "a").state == InstanceState::kReady && instance(all, "b").state == InstanceState::kReady;
  }, 15));
  EXPECT_NE(instance(all, "b").process.pid, b_before.pid);
  EXPECT_FALSE(process_alive(b_before));
  EXPECT_EQ(instance(all, "other").restarts, 0);
  // A kill from outside is not a GPU fault: only that model restarts.
  ::kill(instance(all, "b").process.pid, SIGKILL);
  ASSERT_TRUE(eventually([&] {
    all = node->instances();
    return instance(all, "b").restarts == 2 && instance(all, "b").state == InstanceState::kReady;
  }, 15));
  EXPECT_EQ(instance(all, "a").restarts, 1);
  // Restarted clients are verified again (the daemon was asked after the restarts).
  auto told = commands(0);
  EXPECT_GE(std::count(told.begin(), told.end(), "get_server_list"), 4);
}

TEST_F(FakeGpuNodeTest, TimesliceModelsRunUnderTheMemcapShimAndNoMps) {
  std::unique_ptr<Node> node = Node::up(spec(fake_model("a", "{memory: 0.5}") + fake_model("b", "{memory: 20G}"),
                                             "mode: timeslice\nmemcap_library: " MEMCAP_SHIM "\n"));
  auto all = node->instances();
  for (const char* name : {"a", "b"}) {
    pid_t pid = instance(all, name).process.pid;
    EXPECT_NE(read_file("/proc/" + std::to_string(pid) + "/maps").find("libgpufrac_memcap.so"), std::string::npos)
        << name << " does not have the shim loaded";
    EXPECT_EQ(proc_env(pid, "CUDA_VISIBLE_DEVICES"), kGpu0);
    EXPECT_EQ(proc_env(pid, "CUDA_MPS_PIPE_DIRECTORY"), dir_.path() + "/run/mps/none");
    EXPECT_EQ(proc_env(pid, "GPUFRAC_MEMCAP_TENANT"), std::string("g.") + name);
  }
  EXPECT_EQ(proc_env(instance(all, "b").process.pid, "GPUFRAC_MEMCAP_BYTES"), std::to_string(uint64_t(20) << 30));
  EXPECT_TRUE(node->state()["mps"].empty());
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/run/mps/none"));  // nothing to attach to
}

// Elastic memory on a fractions GPU: each elastic model's ceiling is its MPS pinned limit and its
// shim cap, and the shim gets its floor and the GPU's pool (the memory less the three reserves and
// the static model's cap); `gpufrac status` shows floor..ceiling.
TEST_F(FakeGpuNodeTest, ElasticModelsGetTheirFloorCeilingAndTheGpusPool) {
  std::unique_ptr<Node> node = Node::up(
      spec(fake_model("a", "{compute: 0.5, memory: {min: 10G, max: 60G}}") +
               fake_model("b", "{compute: 0.25, memory: {min: 0.1, max: 0.5}}") +
               fake_model("c", "{compute: 0.25, memory: 20G}"),
           "memcap_library: " MEMCAP_SHIM "\n"));
  auto all = node->instances();
  pid_t a = instance(all, "a").process.pid;
  EXPECT_EQ(proc_env(a, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=61440M");
  EXPECT_EQ(proc_env(a, "GPUFRAC_MEMCAP_BYTES"), std::to_string(uint64_t(60) << 30));
  EXPECT_EQ(proc_env(a, "GPUFRAC_MEMCAP_FLOOR_BYTES"), std::to_string(uint64_t(10) << 30));
  const std::string pool = std::to_string(uint64_t(143771 - 3 * 512 - 20480) << 20);
  EXPECT_EQ(proc_env(a, "GPUFRAC_MEMCAP_POOL_BYTES"), pool);
  pid_t b = instance(all, "b").process.pid;
  EXPECT_EQ(proc_env(b, "GPUFRAC_MEMCAP_POOL_BYTES"), pool);
  EXPECT_EQ(proc_env(b, "GPUFRAC_MEMCAP_FLOOR_BYTES"),
            std::to_string(node->placement().instances[1].memory_floor_bytes));
  pid_t c = instance(all, "c").process.pid;
  EXPECT_EQ(proc_env(c, "GPUFRAC_MEMCAP_BYTES"), std::to_string(uint64_t(20) << 30));
  EXPECT_EQ(proc_env(c, "GPUFRAC_MEMCAP_POOL_BYTES"), "<unset>");

  std::string table = format_node_status(read_node_state(node->run_dir()));
  EXPECT_NE(table.find("10 GiB..60 GiB"), std::string::npos) << table;
  EXPECT_NE(table.find(" 20 GiB "), std::string::npos) << table;
  Json state = node->state();
  EXPECT_EQ(state["models"][0]["memory_floor_bytes"], uint64_t(10) << 30);
  EXPECT_FALSE(state["models"][2].contains("memory_floor_bytes"));
}

}  // namespace
}  // namespace gpufrac
