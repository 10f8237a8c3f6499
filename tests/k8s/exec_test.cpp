// `gpufrac k8s exec` as the kubelet runs it, with the environment KAI and the rendered pod give a
// container: --dry-run's mapping (the example: GPU_PORTION=0.25, a GPU UUID and
// GPUFRAC_GPU_MEMORY_MIB=20000), caps from GPU_PORTION through NVML (the fake NVML of
// tests/fakes/fake_nvml_node.cpp), one line per bad variable; and for real, against a running
// `gpufrac k8s agent` with the fake MPS control (tests/fakes/fake_mps_control.py): an engine (the
// scripted SSE server) that attaches keeps running, one that drops CUDA_MPS_PIPE_DIRECTORY is
// stopped and exec exits 1, no agent means no engine, and the same from another PID namespace.
#include <signal.h>

#include <thread>

#include "common/http_client.h"
#include "k8s_agent_process.h"
#include "k8s_test_util.h"
#include "node/engine_port.h"

namespace gpufrac::testing {
namespace {

constexpr const char* kUuid = "GPU-5a7c0d2e-1111-2222-3333-444455556666";
constexpr const char* kFakeGpu0 = "GPU-00000000-0000-0000-0000-000000000000";

std::string gpufrac() {
  return GPUFRAC_BINARY;
}
std::string shim() {
  return std::filesystem::path(GPUFRAC_BINARY).parent_path().string() + "/libgpufrac_memcap.so";
}

// exec with exactly `env` (and PATH) as its environment.
CommandResult exec_with(const std::string& env, const std::string& args) {
  return run_shell("env -i PATH=/usr/bin:/bin " + env + " " + gpufrac() + " k8s exec " + args);
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(K8sExecDryRun, MapsKaisPortionAUuidAndTheGpuMemoryAnnotation) {
  std::string env = std::string("NVIDIA_VISIBLE_DEVICES=") + kUuid +
                    " GPU_PORTION=0.25 GPUFRAC_GPU_MEMORY_MIB=20000";
  CommandResult r = exec_with(env, "--dry-run -- gpufrac serve --model qwen3-4b --port 8000");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string pipe = std::string("/run/gpufrac/mps/") + kUuid;
  std::vector<std::string> expected = {
      std::string("CUDA_VISIBLE_DEVICES=") + kUuid,
      "CUDA_MPS_PIPE_DIRECTORY=" + pipe + "/pipe",
      "CUDA_MPS_LOG_DIRECTORY=" + pipe + "/log",
      "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25",
      "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20000M",
      "LD_PRELOAD=" + shim(),
      "GPUFRAC_MEMCAP_BYTES=" + std::to_string(uint64_t(20000) << 20),
      "GPUFRAC_MEMCAP_TENANT=engine",
      "GPUFRAC_MEMCAP_STATE_DIR=/tmp/gpufrac-exec-XXXXXX/memcap",
      "command: gpufrac serve --model qwen3-4b --port 8000",
  };
  EXPECT_EQ(lines(r.output), expected);

  CommandResult half = exec_with(env + " GPUFRAC_SM_SHARE=0.5", "--dry-run -- gpufrac serve");
  ASSERT_EQ(half.exit_code, 0) << half.output;
  EXPECT_NE(half.output.find("\nCUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50\n"), std::string::npos)
      << half.output;
  EXPECT_NE(half.output.find("\nCUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20000M\n"), std::string::npos)
      << half.output;
}

TEST(K8sExecDryRun, ReadsTheCdiFormAndReplacesInheritedLimits) {
  CommandResult r = exec_with(
      std::string("NVIDIA_VISIBLE_DEVICES=k8s.device-plugin.nvidia.com/gpu=") + kUuid +
          " GPU_PORTION=0.5 GPUFRAC_GPU_MEMORY_MIB=1000 CUDA_MPS_PIPE_DIRECTORY=/tmp/other "
          "GPUFRAC_MEMCAP_BYTES=1T LD_PRELOAD=/opt/mine.so",
      "--dry-run -- engine");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(std::string("CUDA_VISIBLE_DEVICES=") + kUuid + "\n"), std::string::npos)
      << r.output;
  EXPECT_NE(
      r.output.find(std::string("CUDA_MPS_PIPE_DIRECTORY=/run/gpufrac/mps/") + kUuid + "/pipe\n"),
      std::string::npos);
  EXPECT_NE(r.output.find("LD_PRELOAD=" + shim() + ":/opt/mine.so\n"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("GPUFRAC_MEMCAP_BYTES=1048576000\n"), std::string::npos) << r.output;
}

TEST(K8sExecDryRun, CapsAPortionOfTheGpuNvmlReportsAndFillsThePlaceholders) {
  std::string env = std::string("GPUFRAC_NVML_LIBRARY=") + FAKE_NVML_NODE +
                    " FAKE_NVML_GPUS=2 NVIDIA_VISIBLE_DEVICES=" + kFakeGpu0 + " GPU_PORTION=0.5";
  CommandResult r = exec_with(
      env,
      "--dry-run -- vllm --mem {memory_bytes} --util {gpu_memory_utilization} --gpu {gpu_uuid}");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The fake GPU has 143771 MiB: 0.5 of it less the 512 MiB context reserve, as `gpufrac up` caps
  // it.
  uint64_t cap = uint64_t(0.5 * double(uint64_t(143771) << 20)) - (uint64_t(512) << 20);
  EXPECT_NE(
      r.output.find("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=" + std::to_string(cap >> 20) + "M\n"),
      std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("command: vllm --mem " + std::to_string(cap) + " --util 0.4964 --gpu " +
                          kFakeGpu0),
            std::string::npos)
      << r.output;
}

TEST(K8sExecDryRun, TimesliceIsTheShimAloneAndDedicatedNoLimits) {
  CommandResult ts = exec_with(std::string("NVIDIA_VISIBLE_DEVICES=") + kUuid +
                                   " GPU_PORTION=0.5 GPUFRAC_GPU_MEMORY_MIB=4096",
                               "--mode timeslice --dry-run -- engine");
  ASSERT_EQ(ts.exit_code, 0) << ts.output;
  EXPECT_NE(ts.output.find("CUDA_MPS_PIPE_DIRECTORY=/tmp/gpufrac-exec-XXXXXX/no-mps\n"),
            std::string::npos)
      << ts.output;
  EXPECT_EQ(ts.output.find("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), std::string::npos) << ts.output;
  EXPECT_NE(ts.output.find("GPUFRAC_MEMCAP_BYTES=4294967296\n"), std::string::npos) << ts.output;
  CommandResult whole = exec_with("", "--mode dedicated --dry-run -- engine");
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  EXPECT_EQ(whole.output,
            "CUDA_MPS_PIPE_DIRECTORY=/tmp/gpufrac-exec-XXXXXX/no-mps\ncommand: engine\n");
}

TEST(K8sExecErrors, EveryMissingVariableIsOneLine) {
  CommandResult r = exec_with("", "--dry-run -- engine");
  EXPECT_EQ(r.exit_code, 2);
  std::vector<std::string> got = lines(r.output);
  ASSERT_EQ(got.size(), 3u) << r.output;
  EXPECT_TRUE(got[0].starts_with(
      "gpufrac k8s exec: NVIDIA_VISIBLE_DEVICES: not set; expected the GPU's UUID"))
      << got[0];
  EXPECT_TRUE(got[1].starts_with(
      "gpufrac k8s exec: GPU_PORTION: not set, and neither is GPUFRAC_GPU_MEMORY_MIB"))
      << got[1];
  EXPECT_TRUE(got[2].starts_with(
      "gpufrac k8s exec: GPUFRAC_SM_SHARE: not set, and GPU_PORTION is not set either"))
      << got[2];
}

TEST(K8sExecErrors, EveryMalformedVariableIsOneLine) {
  CommandResult r = exec_with(
      "NVIDIA_VISIBLE_DEVICES=all GPU_PORTION=abc GPUFRAC_GPU_MEMORY_MIB=-5 GPUFRAC_SM_SHARE=1.5",
      "--dry-run -- engine");
  EXPECT_EQ(r.exit_code, 2);
  std::vector<std::string> expected = {
      "gpufrac k8s exec: NVIDIA_VISIBLE_DEVICES: 'all' is not one GPU; expected its UUID (GPU-...) "
      "or its CDI name "
      "(k8s.device-plugin.nvidia.com/gpu=GPU-...): a fraction runs on one GPU",
      "gpufrac k8s exec: GPU_PORTION: 'abc' is not a fraction of the GPU; expected a number in (0, "
      "1] like 0.5 (KAI "
      "sets it from the pod's gpu-fraction annotation)",
      "gpufrac k8s exec: GPUFRAC_GPU_MEMORY_MIB: '-5' is not a size in MiB; expected a positive "
      "integer like 20000 (the "
      "pod's gpu-memory annotation)",
      "gpufrac k8s exec: GPUFRAC_SM_SHARE: '1.5' is not a share of the SMs; expected a number in "
      "(0, 1] like 0.5 or 50% "
      "(the pod's gpufrac/sm-share annotation)",
  };
  EXPECT_EQ(lines(r.output), expected);
  for (const char* devices : {"0", "GPU-aaaa1111,GPU-bbbb2222", "none"}) {
    CommandResult one =
        exec_with(std::string("NVIDIA_VISIBLE_DEVICES=") + devices + " GPU_PORTION=0.5",
                  "--dry-run -- engine");
    EXPECT_EQ(one.exit_code, 2);
    EXPECT_EQ(lines(one.output).size(), 1u) << one.output;
    EXPECT_NE(one.output.find("is not one GPU"), std::string::npos) << one.output;
  }
}

TEST(K8sExecErrors, APortionWithoutNvmlSaysHowToGiveTheCap) {
  CommandResult r = exec_with(std::string("NVIDIA_VISIBLE_DEVICES=") + kUuid + " GPU_PORTION=0.5",
                              "--dry-run -- engine");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(
      r.output,
      std::string(
          "gpufrac k8s exec: GPU_PORTION: a share of the GPU's memory, but NVML cannot tell how "
          "much memory ") +
          kUuid +
          " has; run the pod with the nvidia runtime class (NVML), or "
          "give the cap as GPUFRAC_GPU_MEMORY_MIB (the gpu-memory annotation)\n");
}

// Against a live agent on two fake GPUs.
class K8sExecWithAgent : public ::testing::Test {
 protected:
  void SetUp() override { agent_ = std::make_unique<AgentProcess>(dir_.path() + "/root", 2); }
  // exec's shell command line for the scripted engine on `port`, with a prefix (env -u ...).
  std::string exec_line(int port, const std::string& engine_prefix, const std::string& outer = "") {
    return outer + " env NVIDIA_VISIBLE_DEVICES=" + kFakeGpu0 +
           " GPU_PORTION=0.5 GPUFRAC_GPU_MEMORY_MIB=1024 " + gpufrac() + " k8s exec --agent-root " +
           agent_->root() + " --agent-timeout 5s --startup-timeout 20s" +
           " --health-url http://127.0.0.1:" + std::to_string(port) + "/v1/models -- " +
           engine_prefix + " " + SCRIPTED_SSE_SERVER + " --port " + std::to_string(port) +
           " --model m";
  }
  TempDir dir_;
  std::unique_ptr<AgentProcess> agent_;
};

TEST_F(K8sExecWithAgent, AnEngineThatAttachesServesUntilSigtermThenExecExitsZero) {
  int port = reserve_engine_port().port();
  std::string log = dir_.path() + "/exec.log";
  ProcessId exec = spawn_shell("exec" + exec_line(port, ""), log);
  ASSERT_TRUE(
      eventually([&] { return read_file(log).find("is an MPS client") != std::string::npos; }, 30))
      << read_file(log);
  EXPECT_EQ(http_get("http://127.0.0.1:" + std::to_string(port) + "/v1/models").status, 200);
  EXPECT_NE(read_file(log).find("SM 50%, memory cap 1024 MiB"), std::string::npos)
      << read_file(log);
  ::kill(exec.pid, SIGTERM);
  std::optional<int> status = wait_exit(exec, 20);
  ASSERT_TRUE(status) << read_file(log);
  EXPECT_EQ(*status, 0) << read_file(log);
  EXPECT_EQ(http_get("http://127.0.0.1:" + std::to_string(port) + "/v1/models", 1).status, 0)
      << "the engine is gone";
}

TEST_F(K8sExecWithAgent, AnEngineThatDropsThePipeDirectoryIsStoppedAndExecFails) {
  int port = reserve_engine_port().port();
  std::string log = dir_.path() + "/exec.log";
  ProcessId exec = spawn_shell("exec" + exec_line(port, "env -u CUDA_MPS_PIPE_DIRECTORY"), log);
  std::optional<int> status = wait_exit(exec, 40);
  ASSERT_TRUE(status) << read_file(log);
  EXPECT_EQ(*status, 1) << read_file(log);
  EXPECT_NE(read_file(log).find(std::string("is not an MPS client of ") + kFakeGpu0 + "'s daemon"),
            std::string::npos)
      << read_file(log);
  EXPECT_EQ(http_get("http://127.0.0.1:" + std::to_string(port) + "/v1/models", 1).status, 0)
      << "the engine is gone";
}

TEST_F(K8sExecWithAgent, WithoutAnAgentTheEngineNeverStarts) {
  std::string line = exec_line(reserve_engine_port().port(), "");
  agent_.reset();
  CommandResult r = run_shell(line);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("the engine was not started"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("started the engine"), std::string::npos) << r.output;
}

TEST_F(K8sExecWithAgent, TheCheckWorksFromAnotherPidNamespace) {
  if (run_shell("unshare --pid --fork --mount-proc true").exit_code != 0) {
    GTEST_SKIP() << "unshare --pid is not permitted here";
  }
  // As in a pod, exec is PID 1 of its own PID namespace.
  const std::string pod = "exec unshare --pid --fork --mount-proc";
  int port = reserve_engine_port().port();
  std::string log = dir_.path() + "/exec-ns.log";
  ProcessId exec = spawn_shell(exec_line(port, "", pod), log);
  ASSERT_TRUE(
      eventually([&] { return read_file(log).find("is an MPS client") != std::string::npos; }, 30))
      << read_file(log);
  // The engine's pid in the namespace is not the host pid the agent matched it to.
  std::string text = read_file(log);
  size_t at = text.find("the engine (pid ");
  ASSERT_NE(at, std::string::npos) << text;
  pid_t inside = pid_t(std::stol(text.substr(at + 16)));
  pid_t host = pid_t(std::stol(text.substr(text.find("host pid ", at) + 9)));
  EXPECT_NE(inside, host) << text;
  // unshare ignores SIGTERM while it waits: the kubelet's SIGTERM goes to the pod's PID 1.
  std::vector<pid_t> tree = process_tree(exec.pid);
  ASSERT_GE(tree.size(), 2u);
  ::kill(tree[1], SIGTERM);
  EXPECT_EQ(wait_exit(exec, 20), std::optional<int>(0)) << read_file(log);
  EXPECT_TRUE(eventually(
      [&] {
        return http_get("http://127.0.0.1:" + std::to_string(port) + "/v1/models", 1).status == 0;
      },
      20))
      << "the engine outlived its pod: " << read_file(log);

  int other_port = reserve_engine_port().port();
  std::string failed_log = dir_.path() + "/exec-ns-failed.log";
  ProcessId failed =
      spawn_shell(exec_line(other_port, "env -u CUDA_MPS_PIPE_DIRECTORY", pod), failed_log);
  EXPECT_EQ(wait_exit(failed, 40), std::optional<int>(1)) << read_file(failed_log);
  EXPECT_NE(read_file(failed_log).find("is not an MPS client"), std::string::npos)
      << read_file(failed_log);
}

}  // namespace
}  // namespace gpufrac::testing
