// The launcher and supervisor of a node's model processes.
//
// start_all() launches every instance, waits until each answers its health URL with 200 and
// passes the verify callback (the node's fail-closed MPS check), and throws RuntimeFailure (after
// stopping everything it started) when any instance exits, times out or fails verification: a
// node starts all of its models or none.
//
// Afterwards a monitor thread keeps them up: an instance that exits is restarted (on a freshly
// drawn port, when it has plan_on_port) with exponential backoff (0.5 s doubling to 30 s; back to
// 0.5 s after 30 s of good health). One that keeps failing — `failure_limit` exits (or startup
// timeouts) of its own in a row, without 30 s of good health in between — is marked failed and left
// down (its requests get a clear 503); the others keep serving. Being stopped with a fault group
// (below) is not a failure of its own. Instances in one fault group (the MPS clients of one GPU)
// share fate: a fatal GPU error reaches every client of that GPU, and the MPS server takes no new
// client until all of them have exited, so when one of them dies of anything but an outside kill
// signal (SIGKILL, SIGTERM, SIGINT), or restart_group() is called (an Xid reported by NVML), all of
// them are stopped and restarted together. If a restarted instance fails verification, the fatal
// callback runs (the node goes down).
//
// Every state change is published through the change callback (router readiness, state file),
// called from the thread that made the change. Thread-safe: snapshot() and restart_group() may be
// called from any thread; start_all() and stop_all() from one controlling thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "node/model_launch.h"
#include "node/process.h"

namespace gpufrac {

enum class InstanceState { kStarting, kReady, kRestarting, kStopping, kStopped, kFailed };

// The model id an engine serves under: the first id of its /v1/models (asked with the engine's
// key when it has one); "" when it does not say.
std::string served_model_name(const std::string& base_url, const std::string& engine_key = {});
// {"Authorization: Bearer KEY"}, or nothing for an empty key: how the node's own requests to an
// engine (health, /v1/models) carry its key.
std::vector<std::string> engine_key_header(const std::string& engine_key);
std::string_view instance_state_name(InstanceState state);

struct SupervisedInstance {
  std::string name;   // instance name ("m", "m#1")
  std::string model;  // the model it serves (router key)
  int replica = 0;
  LaunchPlan plan;  // its first start, on a port the node holds until then
  // The plan of a restart on a port drawn just before it (the first start's port may have been
  // taken by another node since the engine died); empty: restarts reuse `plan`.
  std::function<LaunchPlan(int port)> plan_on_port;
  double startup_timeout_s = 600;
  int fault_group = -1;  // instances sharing an MPS server have one group; -1: none
  int failure_limit = 5;  // failures in a row before it is marked failed; 0: never
};

struct InstanceStatus {
  std::string name;
  std::string model;
  int replica = 0;
  InstanceState state = InstanceState::kStarting;
  int restarts = 0;
  int failures = 0;      // failures of its own in a row (see above)
  double backoff_s = 0;  // the wait before the pending (or last) restart
  ProcessId process;
  std::string last_exit;    // "exit code 1", "killed by signal 9 (Killed)", ...
  std::string reason;       // why it is restarting
  std::string served_name;  // the engine's model id from its /v1/models
  int port = 0;
  std::string url;
  std::string log_path;
};

struct SupervisorOptions {
  double stop_grace_s = 10;
  double backoff_initial_s = 0.5;
  double backoff_max_s = 30;
  double healthy_reset_s = 30;
  double health_interval_s = 0.1;
};

class Supervisor {
 public:
  using ChangeCallback = std::function<void(const InstanceStatus&)>;
  // "" lets a freshly ready instance serve; anything else is why it must not (fail closed).
  using VerifyCallback = std::function<std::string(const InstanceStatus&)>;
  // Runs on the monitor thread: it must only signal the node, never call stop_all() itself.
  using FatalCallback = std::function<void(const std::string&)>;

  Supervisor(std::vector<SupervisedInstance> instances, SupervisorOptions options,
             ChangeCallback on_change, VerifyCallback verify, FatalCallback on_fatal);
  ~Supervisor();

  void start_all();
  void restart_group(int fault_group, const std::string& why);
  void stop_all();
  std::vector<InstanceStatus> snapshot() const;

 private:
  struct Instance {
    SupervisedInstance spec;
    InstanceStatus status;
    int64_t started_ns = 0;
    int64_t next_health_ns = 0;
    int64_t ready_since_ns = 0;
    int64_t restart_at_ns = 0;
    double backoff_s = 0;
  };
  void run_monitor();
  void tick();
  void launch(Instance& x);
  // Before a restart: a fresh port and the plan for it (plan_on_port), the port held bound until
  // the engine is about to start.
  void move_to_fresh_port(Instance& x);
  void check_startup(Instance& x);
  void on_exit(Instance& x, int wait_status);
  // A failure of its own: restarts it, or marks it failed past its failure_limit.
  void count_failure(Instance& x, const std::string& why);
  void schedule_restart(Instance& x, const std::string& why);
  bool healthy_long_enough(const Instance& x, int64_t now) const;
  void stop_group_members(int group, const Instance& except, const std::string& why);
  void fail(const std::string& message);
  void publish(Instance& x);

  std::vector<Instance> instances_;  // monitor thread (or the controlling thread when it is off)
  SupervisorOptions options_;
  ChangeCallback on_change_;
  VerifyCallback verify_;
  FatalCallback on_fatal_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<InstanceStatus> published_;
  std::vector<std::pair<int, std::string>> group_requests_;
  bool starting_ = true;
  bool stop_ = false;
  std::string startup_error_;
  std::thread monitor_;
};

}  // namespace gpufrac
