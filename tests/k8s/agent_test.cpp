// `gpufrac k8s agent` on the CPU, on two fake GPUs with the fake MPS control (tests/fakes/): one
// daemon per GPU with its own pipe and log directories under ROOT/mps/<UUID>/, ready only while
// every daemon answers, a daemon killed is restarted, metrics per GPU, the question socket across
// the asker's processes only, one agent per root, and SIGTERM stops every daemon.
#include <signal.h>

#include "common/json.h"
#include "k8s/agent_socket.h"
#include "k8s_agent_process.h"

namespace gpufrac::testing {
namespace {

constexpr const char* kGpu0 = "GPU-00000000-0000-0000-0000-000000000000";
constexpr const char* kGpu1 = "GPU-00000000-0000-0000-0000-000000000001";

Json daemon_json(const AgentProcess& agent, const std::string& uuid) {
  return Json::parse(read_file(agent.pipe_dir(uuid) + "/daemon.json"), nullptr, false);
}

class K8sAgent : public ::testing::Test {
 protected:
  void SetUp() override {
    agent_ = std::make_unique<AgentProcess>(dir_.path() + "/root", 2);
    ASSERT_TRUE(agent_->started()) << agent_->log();
  }
  TempDir dir_;
  std::unique_ptr<AgentProcess> agent_;
};

TEST_F(K8sAgent, StartsOneDaemonPerGpuInItsOwnDirectoriesAndIsReady) {
  for (const char* uuid : {kGpu0, kGpu1}) {
    Json daemon = daemon_json(*agent_, uuid);
    ASSERT_TRUE(daemon.is_object()) << agent_->log();
    EXPECT_EQ(daemon["CUDA_VISIBLE_DEVICES"], uuid);
    EXPECT_EQ(daemon["CUDA_MPS_LOG_DIRECTORY"], agent_->root() + "/mps/" + uuid + "/log");
  }
  EXPECT_EQ(http_get(agent_->url("/ready")).status, 200);
  EXPECT_EQ(http_get(agent_->url("/healthz")).status, 200);
  std::string metrics = http_get(agent_->url("/metrics")).body;
  EXPECT_NE(metrics.find(std::string("gpufrac_agent_mps_daemon_up{gpu=\"1\",gpu_uuid=\"") + kGpu1 +
                         "\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("gpufrac_agent_ready 1"), std::string::npos) << metrics;
  EXPECT_TRUE(std::filesystem::exists(agent_->root() + "/agent.sock"));
}

TEST_F(K8sAgent, RestartsADaemonThatDies) {
  pid_t first = daemon_json(*agent_, kGpu0)["pid"].get<pid_t>();
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  ASSERT_TRUE(eventually(
      [&] {
        Json d = daemon_json(*agent_, kGpu0);
        return d.is_object() && d["pid"].get<pid_t>() != first;
      },
      20))
      << agent_->log();
  EXPECT_TRUE(eventually([&] { return http_get(agent_->url("/ready"), 1).status == 200; }, 10));
  EXPECT_TRUE(eventually(
      [&] {
        return http_get(agent_->url("/metrics"), 1)
                   .body.find(std::string(
                                  "gpufrac_agent_mps_daemon_restarts_total{gpu=\"0\",gpu_uuid=\"") +
                              kGpu0 + "\"} 1") != std::string::npos;
      },
      10))
      << http_get(agent_->url("/metrics")).body;
  EXPECT_NE(agent_->log().find("restarting it"), std::string::npos) << agent_->log();
}

TEST_F(K8sAgent, AnswersForTheAskersOwnProcessesOnly) {
  std::string socket = agent_->root() + "/agent.sock";
  EXPECT_EQ(k8s::ask_agent(socket, {{"op", "ready"}, {"gpu", kGpu1}})["ok"], true);
  Json unknown = k8s::ask_agent(socket, {{"op", "ready"}, {"gpu", "GPU-99"}});
  EXPECT_EQ(unknown["ok"], false);
  EXPECT_NE(unknown["error"].get<std::string>().find("serves no GPU GPU-99"), std::string::npos)
      << unknown;

  // A child of this test attached to GPU 1's pipe directory, and one that is not.
  ProcessId client = spawn_shell("exec sleep 30", dir_.path() + "/client.log",
                                 {"CUDA_MPS_PIPE_DIRECTORY=" + agent_->pipe_dir(kGpu1)});
  ProcessId stray = spawn_shell("exec sleep 30", dir_.path() + "/stray.log");
  ASSERT_TRUE(eventually(
      [&] {
        return k8s::ask_agent(
                   socket, {{"op", "client"}, {"gpu", kGpu1}, {"pid", client.pid}})["ok"] == true;
      },
      10));
  EXPECT_EQ(
      k8s::ask_agent(socket, {{"op", "client"}, {"gpu", kGpu1}, {"pid", client.pid}})["host_pid"],
      client.pid);
  EXPECT_EQ(k8s::ask_agent(socket, {{"op", "client"}, {"gpu", kGpu0}, {"pid", client.pid}})["ok"],
            false)
      << "a client of GPU 1 is not one of GPU 0";
  EXPECT_EQ(k8s::ask_agent(socket, {{"op", "client"}, {"gpu", kGpu1}, {"pid", stray.pid}})["ok"],
            false);
  Json foreign =
      k8s::ask_agent(socket, {{"op", "client"}, {"gpu", kGpu1}, {"pid", 1}});  // init is not ours
  EXPECT_EQ(foreign["ok"], false);
  EXPECT_NE(foreign["error"].get<std::string>().find("is not the asker's"), std::string::npos)
      << foreign;
  for (const ProcessId& p : {client, stray}) stop_process_group(p, 1, true);
}

TEST_F(K8sAgent, ASecondAgentOnTheSameRootIsRefused) {
  CommandResult second =
      run_shell(std::string("GPUFRAC_NVML_LIBRARY=") + FAKE_NVML_NODE + " " + GPUFRAC_BINARY +
                " k8s agent --root " + agent_->root() + " --listen 127.0.0.1:0 --mps-control " +
                source_tree() + "/tests/fakes/fake_mps_control.py");
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.output.find("another gpufrac agent holds " + agent_->root() + "/agent.lock"),
            std::string::npos)
      << second.output;
  EXPECT_EQ(http_get(agent_->url("/ready")).status, 200) << "the first agent is untouched";
}

TEST_F(K8sAgent, SigtermStopsEveryDaemonItStarted) {
  std::vector<ProcessId> daemons;
  for (const char* uuid : {kGpu0, kGpu1})
    daemons.push_back(process_identity(daemon_json(*agent_, uuid)["pid"].get<pid_t>()));
  for (const ProcessId& d : daemons) ASSERT_TRUE(process_alive(d));
  ASSERT_EQ(::kill(agent_->process().pid, SIGTERM), 0);
  EXPECT_EQ(wait_exit(agent_->process(), 30), std::optional<int>(0)) << agent_->log();
  for (const ProcessId& d : daemons)
    EXPECT_FALSE(process_alive(d)) << "daemon " << d.pid << " left running";
  EXPECT_FALSE(std::filesystem::exists(agent_->root() + "/agent.sock"));
  for (const char* uuid : {kGpu0, kGpu1}) {
    std::string commands = read_file(agent_->pipe_dir(uuid) + "/commands.log");
    EXPECT_NE(commands.find("quit"), std::string::npos) << commands;
  }
}

}  // namespace
}  // namespace gpufrac::testing
