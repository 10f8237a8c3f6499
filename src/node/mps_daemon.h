// One MPS control daemon per GPU, started and owned by the node (docs/architecture.md, `fractions` mode).
//
// start() runs `nvidia-cuda-mps-control -f` (foreground, so the node holds its pid and start time)
// with CUDA_VISIBLE_DEVICES = the GPU's UUID and its own pipe and log directories, and returns
// once the daemon answers `get_server_list`. Commands go the documented way: one
// `nvidia-cuda-mps-control` invocation with the command on stdin and the same
// CUDA_MPS_PIPE_DIRECTORY. client_env() is what a model process needs to attach; attached()
// checks that it did (MPS fails open: a client that misses the pipe directory runs uncapped on
// the whole GPU, silently), and quit() stops the daemon and its server.
//
// The control program is, in order: the spec's mps_control, $GPUFRAC_MPS_CONTROL, or
// nvidia-cuda-mps-control on PATH (tests use tests/fakes/fake_mps_control.py).
// Thread-safe: every method runs independent control invocations.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "node/process.h"

namespace gpufrac {

struct MpsDaemonConfig {
  std::string control_program;  // resolved path of nvidia-cuda-mps-control
  std::string gpu_uuid;         // CUDA_VISIBLE_DEVICES of the daemon
  std::string pipe_dir;         // CUDA_MPS_PIPE_DIRECTORY (created, mode 0700)
  std::string log_dir;          // CUDA_MPS_LOG_DIRECTORY (created)
};

// The control program to use; throws UsageError naming mps_control when none is found.
std::string find_mps_control(const std::string& from_spec);

class MpsDaemon {
 public:
  // Starts the daemon; throws RuntimeFailure (with the daemon's log tail) when it does not answer
  // within `timeout_s`.
  static std::unique_ptr<MpsDaemon> start(const MpsDaemonConfig& config, double timeout_s = 15);
  // A daemon started earlier, possibly by another process (`gpufrac down`).
  MpsDaemon(MpsDaemonConfig config, ProcessId process) : config_(std::move(config)), process_(process) {}

  const MpsDaemonConfig& config() const { return config_; }
  const ProcessId& process() const { return process_; }
  bool alive() const { return process_alive(process_); }

  // Sends one command; returns its output. Throws RuntimeFailure when the daemon does not answer.
  std::string command(const std::string& line, double timeout_s = 10) const;
  std::vector<pid_t> server_pids(double timeout_s = 10) const;
  // Client PIDs of every server of this daemon (get_client_list and get_device_client_list).
  std::vector<pid_t> client_pids() const;
  // True when `root` or a process it started is a client of this daemon's server.
  bool attached(pid_t root) const;

  // The environment an MPS client of this GPU gets (pipe and log directories).
  std::vector<std::pair<std::string, std::string>> client_env() const;

  // `quit`, then waits for the daemon and the servers it had to exit; kills what is left (by pid
  // and start time) after `timeout_s`. Returns false when something had to be killed.
  bool quit(double timeout_s = 10);

 private:
  MpsDaemonConfig config_;
  ProcessId process_;
};

// The PIDs in a control program's answer: every token made only of digits, or "PID.N" as
// get_device_client_list prints clients (device lines such as "[0] 00:00.0, NVIDIA H200" and
// UUIDs give no PID), in order, without duplicates or zeros.
std::vector<pid_t> parse_mps_pids(const std::string& output);

}  // namespace gpufrac
