// The pieces of exec and the agent that need no process: the pod environment's parsing, the
// exec plan's limits, PID namespaces and pod identity from /proc, the agent's metrics text and
// the router's --upstream values.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>

#include "common/error.h"
#include "k8s/agent_metrics.h"
#include "k8s/cluster_router.h"
#include "k8s/exec_plan.h"
#include "k8s/pid_namespace.h"
#include "k8s/pod_gpu_env.h"

namespace gpufrac::k8s {
namespace {

constexpr const char* kUuid = "GPU-5a7c0d2e-1111-2222-3333-444455556666";

PodGpuEnv read(const std::map<std::string, std::string>& vars,
               SharingMode mode = SharingMode::kFractions) {
  return read_pod_gpu_env(
      [&](const char* name) {
        auto it = vars.find(name);
        return it == vars.end() ? static_cast<const char*>(nullptr) : it->second.c_str();
      },
      mode);
}

TEST(PodGpuEnv, TheSmShareFallsBackToThePortionAndTheMemoryAnnotationWins) {
  PodGpuEnv env = read({{"NVIDIA_VISIBLE_DEVICES", kUuid},
                        {"GPU_PORTION", "0.25"},
                        {"GPUFRAC_GPU_MEMORY_MIB", "20000"}});
  EXPECT_EQ(env.gpu_uuid, kUuid);
  EXPECT_EQ(env.sm_share, 0.25);
  EXPECT_EQ(env.memory_mib, 20000u);
  EXPECT_EQ(
      read(
          {{"NVIDIA_VISIBLE_DEVICES", kUuid}, {"GPU_PORTION", "0.25"}, {"GPUFRAC_SM_SHARE", "50%"}})
          .sm_share,
      0.5);
  // The downward API gives "" for a missing annotation: absent, not malformed.
  EXPECT_EQ(
      read({{"NVIDIA_VISIBLE_DEVICES", kUuid}, {"GPU_PORTION", "0.5"}, {"GPUFRAC_SM_SHARE", ""}})
          .sm_share,
      0.5);
  EXPECT_EQ(read({}, SharingMode::kDedicated).gpu_uuid, "");
  EXPECT_THROW(read({{"NVIDIA_VISIBLE_DEVICES", kUuid}}, SharingMode::kTimeslice), UsageError);
}

TEST(PodGpuEnv, KnowsTheUuidAndCdiForms) {
  EXPECT_EQ(visible_gpu_uuid(kUuid), kUuid);
  EXPECT_EQ(visible_gpu_uuid(std::string("k8s.device-plugin.nvidia.com/gpu=") + kUuid), kUuid);
  for (const char* other : {"all", "none", "void", "0", "GPU-1,GPU-2", "MIG-1234", "GPU-xyz"}) {
    EXPECT_EQ(visible_gpu_uuid(other), std::nullopt) << other;
  }
}

TEST(ExecPlan, CapsAPortionAsTheNodeDoesAndFillsThePlaceholders) {
  PodGpuEnv pod;
  pod.gpu_uuid = kUuid;
  pod.gpu_portion = 0.5;
  pod.sm_share = 0.333;
  ExecOptions options;
  options.agent_root = "/run/gpufrac";
  options.state_dir = "/tmp/x";
  uint64_t gpu = uint64_t(40960) << 20;  // an A100's 40 GiB: the study's 19968 MiB cap at 0.5
  ExecPlan plan =
      plan_exec(pod, options, gpu, {"vllm", "--util={gpu_memory_utilization}", "{memory_bytes}"},
                {"HOME=/root"});
  EXPECT_EQ(plan.memory_cap_bytes, uint64_t(19968) << 20);
  EXPECT_EQ(plan.sm_percent, 33);
  EXPECT_EQ(plan.argv, (std::vector<std::string>{"vllm", "--util=0.4875",
                                                 std::to_string(uint64_t(19968) << 20)}));
  EXPECT_EQ(plan.set.front(), (std::pair<std::string, std::string>{"CUDA_VISIBLE_DEVICES", kUuid}));
  EXPECT_EQ(plan.env.front(), "HOME=/root");
  EXPECT_THROW(plan_exec(pod, options, gpu, {}, {}), UsageError);
  options.mode = SharingMode::kTimeslice;
  EXPECT_THROW(plan_exec(pod, options, gpu, {"engine"}, {}), UsageError)
      << "timeslice without the shim";
}

TEST(PidNamespace, ReadsThisProcesssNspidAndPodUids) {
  std::vector<pid_t> pids = namespace_pids(::getpid());
  ASSERT_FALSE(pids.empty());
  EXPECT_EQ(find_in_tree_by_namespace_pid(::getpid(), pids.back()), ::getpid());
  EXPECT_EQ(pod_uid_from_cgroup("0::/kubepods.slice/kubepods-burstable.slice/"
                                "kubepods-burstable-pod1a2b3c4d_5e6f_7a8b_9c0d_1e2f3a4b5c6d.slice/"
                                "cri-containerd-ab.scope\n"),
            "1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d");
  EXPECT_EQ(pod_uid_from_cgroup(
                "12:memory:/kubepods/besteffort/pod1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d/0123abc\n"),
            "1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d");
  EXPECT_EQ(pod_uid_from_cgroup("0::/user.slice/user-0.slice/session-1.scope\n"), "");
}

TEST(AgentMetrics, OneSeriesPerGpuAndOneLinePerProcess) {
  AgentSnapshot snapshot;
  AgentGpu gpu;
  gpu.index = 1;
  gpu.uuid = kUuid;
  gpu.answering = true;
  gpu.restarts = 2;
  gpu.servers = {100};
  gpu.clients = {200, 201};
  gpu.memory = {{100, 4096, ""}, {200, 1024, ""}};
  snapshot.gpus.push_back(gpu);
  std::string text = agent_metrics_text(snapshot, true);
  std::string labels = std::string("gpu=\"1\",gpu_uuid=\"") + kUuid + "\"";
  for (const std::string& line :
       {std::string("gpufrac_agent_ready 1\n"), "gpufrac_agent_mps_daemon_up{" + labels + "} 1\n",
        "gpufrac_agent_mps_daemon_restarts_total{" + labels + "} 2\n",
        "gpufrac_agent_mps_servers{" + labels + "} 1\n",
        "gpufrac_agent_mps_clients{" + labels + "} 2\n",
        "gpufrac_agent_gpu_process_memory_bytes{" + labels +
            ",pid=\"100\",role=\"mps_server\",pod_uid=\"\"} 4096\n",
        "gpufrac_agent_gpu_process_memory_bytes{" + labels +
            ",pid=\"200\",role=\"mps_client\",pod_uid=\"\"} 1024\n",
        std::string("# TYPE gpufrac_agent_mps_daemon_restarts_total counter\n")}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin\n" << text;
  }
}

TEST(ClusterRouter, UpstreamsAreNameEqualsHealthUrl) {
  std::vector<Upstream> ups = parse_upstreams({"Org/Big=http://127.0.0.1:8123/v1/models"});
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_EQ(ups[0].model, "Org/Big");
  EXPECT_EQ(ups[0].base_url, "http://127.0.0.1:8123");
  EXPECT_EQ(ups[0].url.path, "/v1/models");
  EXPECT_THROW(parse_upstreams({}), UsageError);
  EXPECT_THROW(parse_upstreams({"no-url"}), UsageError);
  EXPECT_THROW(parse_upstreams({"a=http://127.0.0.1:1/h", "a=http://127.0.0.1:2/h"}), UsageError);
}

}  // namespace
}  // namespace gpufrac::k8s
