// The node agent (`gpufrac k8s agent`, one per GPU node, run by the rendered DaemonSet): one MPS
// control daemon per GPU, started and checked the way `gpufrac up` does it (mps_daemon.h), with
// its pipe and log directories under ROOT/mps/<GPU UUID>/ (agent_layout.h).
//
// start() takes ROOT/agent.lock (a second agent on the node is refused), makes the directories
// (owned by client_uid when given, so that pods running as that user can reach them; the shm
// directory is 1777 like /dev/shm), stops a daemon an earlier agent left answering on a pipe
// directory (it is ours to replace, not to adopt), and starts every GPU's daemon. A monitor
// thread then checks every check_interval_s: a daemon that died is restarted (backoff 0.5 s
// doubling to 30 s), and each GPU's servers, clients and per-process GPU memory (NVML) are
// recorded for /ready and /metrics. ready() is true only while every GPU's daemon answered at
// the last check. answer() serves the question socket (agent_socket.h). stop() quits every
// daemon and waits for them and their servers to exit (killing what is left).
// Thread-safe: snapshot(), ready() and answer() may be called from any thread.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/json.h"
#include "node/gpus.h"
#include "node/mps_daemon.h"

namespace gpufrac::k8s {

struct AgentOptions {
  std::string root;
  std::string control_program;  // resolved nvidia-cuda-mps-control
  std::optional<uid_t> client_uid;
  double check_interval_s = 1;
  double backoff_initial_s = 0.5;
  double backoff_max_s = 30;
};

struct AgentGpu {
  int index = 0;
  std::string uuid;
  bool answering = false;  // the daemon answered get_server_list at the last check
  int restarts = 0;
  std::string error;  // why it is not answering
  pid_t daemon_pid = 0;
  std::vector<pid_t> servers;
  std::vector<pid_t> clients;
  std::vector<GpuProcess> memory;  // NVML's per-process GPU memory on this GPU
};

struct AgentSnapshot {
  std::vector<AgentGpu> gpus;
  int64_t checked_ns = 0;  // monotonic time of the last check
};

class NodeAgent {
 public:
  // `gpus`: the GPUs to serve, from the machine's inventory. Throws UsageError/RuntimeFailure
  // when the lock is held or a daemon cannot start (after stopping what it started).
  static std::unique_ptr<NodeAgent> start(AgentOptions options, std::vector<GpuInfo> gpus);
  ~NodeAgent();  // stop()
  void stop();

  AgentSnapshot snapshot() const;
  bool ready() const;
  Json answer(const Json& request, pid_t asker) const;

 private:
  struct Daemon {
    GpuInfo gpu;
    MpsDaemonConfig config;
    std::unique_ptr<MpsDaemon> daemon;  // null while down
    int restarts = 0;
    double backoff_s = 0;
    int64_t restart_at_ns = 0;
    std::string error;
  };
  NodeAgent() = default;
  void prepare_directories(const Daemon& d) const;
  void start_daemon(Daemon& d);
  void run_monitor();
  void check(Daemon& d, AgentGpu& seen);
  std::optional<MpsDaemon> daemon_of(const std::string& uuid, std::string& why) const;

  AgentOptions options_;
  int lock_fd_ = -1;
  mutable std::mutex mutex_;  // guards daemons_' pointers and snapshot_
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<Daemon> daemons_;
  AgentSnapshot snapshot_;
  std::thread monitor_;
};

}  // namespace gpufrac::k8s
