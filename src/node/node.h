// A running node: a spec made real. Node::up() places every model (placement.h), takes the run
// directory, opens the router, starts one MPS control daemon per `fractions` GPU holding a model, starts every
// model under its limits (model_launch.h) and waits until all are healthy and — on `fractions`
// GPUs — verified as MPS clients of their GPU's daemon. Any failure stops everything it started
// and throws (UsageError for spec/placement problems, RuntimeFailure otherwise): a node is all up
// or not up at all. The state file (node_state.h) is kept current for `down` and `status`.
//
// down() drains the router (new requests get 503, requests in flight finish, up to
// drain_timeout), stops the models (SIGTERM, SIGKILL after stop_timeout), quits the MPS daemons
// and marks the state stopped: it stops everything it started and nothing else.
//
// Used by `gpufrac up` and by the experiment runner. Thread-safe: request_stop() may be called from
// any thread (or a signal-handling thread); up/wait/down from one controlling thread.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/json.h"
#include "node/gpu_fault_watcher.h"
#include "node/mps_daemon.h"
#include "node/node_spec.h"
#include "node/placement.h"
#include "node/router.h"
#include "node/supervisor.h"

namespace gpufrac {

struct NodeOptions {
  std::string gpufrac_binary;  // runs builtin models; empty: this executable (/proc/self/exe)
  std::string spec_path;       // recorded in the state file
  SupervisorOptions supervisor;
};

class Node {
 public:
  static std::unique_ptr<Node> up(const NodeSpec& spec, NodeOptions options = {});
  ~Node();  // down()

  // Waits up to `timeout_s` for request_stop() or a fatal error (a restarted model failed its MPS
  // check); true once either happened: call down() next.
  bool wait_for_stop(double timeout_s);
  void request_stop();
  std::string error() const;  // the fatal error, "" for a requested stop
  void down();

  const std::string& url() const { return url_; }
  int port() const { return router_->port(); }
  const std::string& run_dir() const { return run_dir_; }
  const Placement& placement() const { return placement_; }
  std::vector<InstanceStatus> instances() const { return supervisor_->snapshot(); }
  Json state() const;

 private:
  Node() = default;
  void start(const NodeSpec& spec);
  void start_mps_daemons();
  std::string verify_client(const InstanceStatus& status) const;
  void on_instance_change(const InstanceStatus& status);
  void save_state();
  void cleanup_after_failure(const std::string& error);

  NodeSpec spec_;
  NodeOptions options_;
  std::string run_dir_;
  std::string url_;
  int lock_fd_ = -1;
  Placement placement_;
  std::vector<std::unique_ptr<MpsDaemon>> mps_;  // per device; null unless fractions on a GPU
  std::vector<MpsDaemonConfig> mps_configs_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<Supervisor> supervisor_;
  std::unique_ptr<GpuFaultWatcher> fault_watcher_;

  mutable std::mutex mutex_;  // guards the fields below and state file writes
  std::condition_variable wake_;
  std::string phase_ = "starting";
  std::string error_;
  bool stop_requested_ = false;
  bool down_ = false;
};

}  // namespace gpufrac
