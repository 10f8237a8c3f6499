// A `gpufrac k8s agent` process for tests: on fake GPUs (tests/fakes/fake_nvml_node.cpp, through
// GPUFRAC_NVML_LIBRARY) with the fake MPS control (tests/fakes/fake_mps_control.py), checking
// every 0.2 s; started in the constructor (returns once /ready is 200), SIGTERM in the destructor.
// Also spawning shell command lines with a log, and waiting for them to exit.
#pragma once

#include <signal.h>

#include <chrono>
#include <functional>
#include <optional>
#include <thread>

#include "common/http_client.h"
#include "k8s_test_util.h"
#include "node/engine_port.h"
#include "node/process.h"

namespace gpufrac::testing {

// /bin/sh -c LINE in its own process group, output to `log`.
inline ProcessId spawn_shell(const std::string& line, const std::string& log,
                             std::vector<std::string> env = {}) {
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", line};
  options.env = current_environment();
  for (const std::string& entry : env)
    set_env(options.env, entry.substr(0, entry.find('=')), entry.substr(entry.find('=') + 1));
  options.log_path = log;
  return spawn_process(options);
}

// The exit code (128 + signal when killed) once the child exits, nullopt after `timeout_s`.
inline std::optional<int> wait_exit(const ProcessId& child, double timeout_s) {
  std::optional<int> status;
  eventually([&] { return (status = reap_child(child.pid)).has_value(); }, timeout_s);
  if (!status) return std::nullopt;
  return WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
}

class AgentProcess {
 public:
  AgentProcess(std::string root, int gpus, const std::string& extra = "")
      : root_(std::move(root)), port_(reserve_engine_port().port()), log_(root_ + ".log") {
    std::string line = std::string(GPUFRAC_BINARY) + " k8s agent --root " + root_ +
                       " --listen 127.0.0.1:" + std::to_string(port_) + " --mps-control " +
                       source_tree() + "/tests/fakes/fake_mps_control.py --check-interval 0.2s " +
                       extra;
    process_ = spawn_shell("exec " + line, log_,
                           {std::string("GPUFRAC_NVML_LIBRARY=") + FAKE_NVML_NODE,
                            "FAKE_NVML_GPUS=" + std::to_string(gpus)});
    started_ =
        eventually(
            [&] { return http_get(url("/ready"), 1).status == 200 || !process_alive(process_); },
            30) &&
        process_alive(process_);
  }
  ~AgentProcess() {
    if (process_alive(process_)) ::kill(process_.pid, SIGTERM);
    wait_exit(process_, 30);
  }
  bool started() const { return started_; }
  const std::string& root() const { return root_; }
  const ProcessId& process() const { return process_; }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  std::string log() const { return read_file(log_); }
  std::string pipe_dir(const std::string& uuid) const { return root_ + "/mps/" + uuid + "/pipe"; }

 private:
  std::string root_;
  int port_;
  std::string log_;
  ProcessId process_;
  bool started_ = false;
};

}  // namespace gpufrac::testing
