// The MPS daemon protocol against tests/fakes/fake_mps_control.py, which speaks the real control
// program's stdin protocol and records every command it was told.
#include "node/mps_daemon.h"

#include <signal.h>

#include "common/error.h"
#include "node/process.h"
#include "node_test_util.h"

namespace gpufrac {
namespace {

using testing::eventually;
using testing::read_file;

TEST(MpsPids, TakesOnlyDigitTokens) {
  EXPECT_EQ(parse_mps_pids("1234\n5678\n"), (std::vector<pid_t>{1234, 5678}));
  EXPECT_EQ(parse_mps_pids("GPU-6a1b-22c3-0000 1234, 99:\n  1234\n0\n"), (std::vector<pid_t>{1234, 99}));
  EXPECT_TRUE(parse_mps_pids("Cannot find MPS control daemon process\n").empty());
  // get_device_client_list on an H200 with driver 580 (tests/gpu/node/run saved it).
  EXPECT_EQ(parse_mps_pids("[0] 00:00.0, NVIDIA H200\n1517.1\n1518.1\n"), (std::vector<pid_t>{1517, 1518}));
}

class MpsDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.control_program = find_mps_control(testing::fake_path("fake_mps_control.py"));
    config_.gpu_uuid = "GPU-11111111-2222-3333-4444-555555555555";
    config_.pipe_dir = dir_.path() + "/mps/gpu0/pipe";
    config_.log_dir = dir_.path() + "/mps/gpu0/log";
  }
  void TearDown() override {
    for (const ProcessId& p : spawned_) stop_process_group(p, 1, true);
  }
  // A long-running stand-in for a model process, with or without the client environment.
  ProcessId spawn_sleeper(bool with_pipe_dir, const std::string& pipe_dir) {
    SpawnOptions options;
    options.argv = {"sleep", "60"};
    options.env = current_environment();
    remove_env_prefix(options.env, "CUDA_MPS_");
    if (with_pipe_dir) set_env(options.env, "CUDA_MPS_PIPE_DIRECTORY", pipe_dir);
    spawned_.push_back(spawn_process(options));
    return spawned_.back();
  }
  std::vector<std::string> commands() {
    std::vector<std::string> lines;
    std::istringstream in(read_file(config_.pipe_dir + "/commands.log"));
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  testing::TempDir dir_;
  MpsDaemonConfig config_;
  std::vector<ProcessId> spawned_;
};

TEST_F(MpsDaemonTest, StartsPerGpuAttachesClientsAndQuits) {
  std::unique_ptr<MpsDaemon> daemon = MpsDaemon::start(config_);
  ASSERT_TRUE(daemon->alive());
  // The daemon saw only its GPU, and runs with its own log directory.
  std::string started = read_file(config_.pipe_dir + "/daemon.json");
  EXPECT_NE(started.find(config_.gpu_uuid), std::string::npos) << started;
  EXPECT_NE(started.find(config_.log_dir), std::string::npos) << started;
  EXPECT_NE(read_file(config_.log_dir + "/control.log").find("started"), std::string::npos);
  EXPECT_TRUE(daemon->server_pids().empty());  // no client yet, so no server

  ProcessId client = spawn_sleeper(true, config_.pipe_dir);
  ProcessId stray = spawn_sleeper(false, config_.pipe_dir);
  ProcessId wrong_dir = spawn_sleeper(true, config_.pipe_dir + "-typo");
  EXPECT_TRUE(daemon->attached(client.pid));
  EXPECT_FALSE(daemon->attached(stray.pid));
  EXPECT_FALSE(daemon->attached(wrong_dir.pid));
  std::vector<pid_t> servers = daemon->server_pids();
  ASSERT_EQ(servers.size(), 1u);
  ProcessId server = process_identity(servers[0]);

  // Client env points at this daemon's directories.
  auto env = daemon->client_env();
  EXPECT_EQ(env[0], (std::pair<std::string, std::string>{"CUDA_MPS_PIPE_DIRECTORY", config_.pipe_dir}));

  EXPECT_TRUE(daemon->quit());
  EXPECT_FALSE(daemon->alive());
  EXPECT_FALSE(process_alive(server));
  std::vector<std::string> told = commands();
  ASSERT_FALSE(told.empty());
  EXPECT_EQ(told.back(), "quit");
  EXPECT_NE(std::find(told.begin(), told.end(), "get_client_list " + std::to_string(servers[0])), told.end());
  EXPECT_NE(std::find(told.begin(), told.end(), "get_device_client_list " + std::to_string(servers[0])),
            told.end());
}

TEST_F(MpsDaemonTest, AClientDeeperInTheProcessTreeCounts) {
  std::unique_ptr<MpsDaemon> daemon = MpsDaemon::start(config_);
  // A launcher (no MPS env) whose child is the CUDA process, as engines with worker processes do.
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", "CUDA_MPS_PIPE_DIRECTORY=" + config_.pipe_dir + " sleep 60; :"};
  options.env = current_environment();
  remove_env_prefix(options.env, "CUDA_MPS_");
  spawned_.push_back(spawn_process(options));
  EXPECT_TRUE(eventually([&] { return daemon->attached(spawned_.back().pid); }, 5));
  daemon->quit();
}

TEST_F(MpsDaemonTest, ASecondDaemonOnTheSamePipeDirIsRefused) {
  std::unique_ptr<MpsDaemon> daemon = MpsDaemon::start(config_);
  EXPECT_THROW(MpsDaemon::start(config_), RuntimeFailure);
  EXPECT_TRUE(daemon->alive());
  daemon->quit();
}

TEST_F(MpsDaemonTest, QuitFromAnotherHandleStopsADaemonThatIgnoresIt) {
  std::unique_ptr<MpsDaemon> daemon = MpsDaemon::start(config_);
  // `gpufrac down` in another process only has the recorded identity.
  MpsDaemon recorded(config_, daemon->process());
  ::kill(daemon->process().pid, SIGSTOP);  // a hung daemon: quit gets no answer
  EXPECT_FALSE(recorded.quit(1));
  EXPECT_TRUE(eventually([&] {
    reap_child(daemon->process().pid);
    return !daemon->alive();
  }, 5));
}

TEST_F(MpsDaemonTest, ControlProgramNotFoundIsASpecError) {
  try {
    find_mps_control("/nonexistent/nvidia-cuda-mps-control");
    FAIL() << "accepted a missing program";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("mps_control"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpufrac
