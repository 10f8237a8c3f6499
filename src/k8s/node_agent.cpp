#include "k8s/node_agent.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "k8s/agent_layout.h"
#include "k8s/pid_namespace.h"

namespace gpufrac::k8s {
namespace {

void make_dir(const std::string& path, mode_t mode, std::optional<uid_t> owner) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw RuntimeFailure("cannot create " + path + ": " + ec.message());
  ::chmod(path.c_str(), mode);
  if (owner && ::chown(path.c_str(), *owner, gid_t(-1)) != 0) {
    throw RuntimeFailure("cannot give " + path + " to user " + std::to_string(*owner) + ": " +
                         std::strerror(errno));
  }
}

int take_lock(const std::string& root) {
  std::string path = agent_lock_path(root);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw RuntimeFailure("cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    throw RuntimeFailure(
        "another gpufrac agent holds " + path +
        "; a node runs one agent (one per cluster: " + "deploy the gpufrac-agent DaemonSet once)");
  }
  return fd;
}

// A daemon an earlier agent left serving this pipe directory (the agent was killed, its daemon
// was not): the directory is ours, so it is stopped rather than adopted.
void stop_leftover_daemon(const MpsDaemonConfig& config) {
  MpsDaemon leftover(config, {});
  try {
    leftover.command("get_server_list", 3);
  } catch (const RuntimeFailure&) {
    return;  // nobody answers: nothing left over
  }
  log_warn("an MPS control daemon already serves ", config.pipe_dir,
           " (left by an earlier agent); stopping it");
  try {
    leftover.command("quit", 5);
  } catch (const RuntimeFailure& e) {
    log_warn("quit: ", e.what());
  }
  int64_t deadline = monotonic_ns() + 10'000'000'000;
  while (monotonic_ns() < deadline) {
    try {
      leftover.command("get_server_list", 2);
    } catch (const RuntimeFailure&) {
      return;
    }
    ::usleep(100'000);
  }
  throw RuntimeFailure(
      "the MPS control daemon left on " + config.pipe_dir + " does not quit; stop it by hand " +
      "(echo quit | CUDA_MPS_PIPE_DIRECTORY=" + config.pipe_dir + " nvidia-cuda-mps-control)");
}

}  // namespace

std::unique_ptr<NodeAgent> NodeAgent::start(AgentOptions options, std::vector<GpuInfo> gpus) {
  if (gpus.empty()) throw RuntimeFailure("no GPU to serve; the agent runs on GPU nodes");
  std::unique_ptr<NodeAgent> agent(new NodeAgent());
  agent->options_ = std::move(options);
  const std::string& root = agent->options_.root;
  make_dir(root, 0755, std::nullopt);
  agent->lock_fd_ = take_lock(root);
  make_dir(root + "/mps", 0755, std::nullopt);
  make_dir(agent_shm_dir(root), 01777, std::nullopt);
  for (GpuInfo& gpu : gpus) {
    Daemon d;
    d.config = {agent->options_.control_program, gpu.uuid, mps_pipe_dir(root, gpu.uuid),
                mps_log_dir(root, gpu.uuid)};
    d.gpu = std::move(gpu);
    agent->daemons_.push_back(std::move(d));
  }
  try {
    for (Daemon& d : agent->daemons_) {
      agent->prepare_directories(d);
      stop_leftover_daemon(d.config);
      agent->start_daemon(d);
    }
  } catch (...) {
    agent->stop();
    throw;
  }
  agent->monitor_ = std::thread([a = agent.get()] { a->run_monitor(); });
  return agent;
}

NodeAgent::~NodeAgent() {
  stop();
}

void NodeAgent::prepare_directories(const Daemon& d) const {
  // MpsDaemon::start makes the pipe and log directories 0700: owned by the pods' user, they
  // reach them and nobody else does (root, the daemon's user, always does).
  make_dir(mps_gpu_dir(options_.root, d.gpu.uuid), 0755, options_.client_uid);
  make_dir(d.config.pipe_dir, 0700, options_.client_uid);
  make_dir(d.config.log_dir, 0700, options_.client_uid);
}

void NodeAgent::start_daemon(Daemon& d) {
  std::unique_ptr<MpsDaemon> daemon = MpsDaemon::start(d.config);
  std::lock_guard lock(mutex_);
  d.daemon = std::move(daemon);
  d.error.clear();
}

void NodeAgent::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  for (Daemon& d : daemons_) {
    if (!d.daemon) continue;
    log_info("stopping the MPS control daemon of ", d.gpu.uuid, " (pid ", d.daemon->process().pid,
             ")");
    d.daemon->quit();
    std::lock_guard lock(mutex_);
    d.daemon.reset();
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
  lock_fd_ = -1;
}

void NodeAgent::check(Daemon& d, AgentGpu& seen) {
  int64_t now = monotonic_ns();
  if (d.daemon) {
    if (std::optional<int> status = reap_child(d.daemon->process().pid)) {
      d.error = "the MPS control daemon (pid " + std::to_string(d.daemon->process().pid) +
                ") exited (" + describe_wait_status(*status) + ")";
      log_warn(d.gpu.uuid, ": ", d.error, "; restarting it");
      std::lock_guard lock(mutex_);
      d.daemon.reset();
      d.backoff_s = d.backoff_s == 0 ? options_.backoff_initial_s
                                     : std::min(d.backoff_s * 2, options_.backoff_max_s);
      d.restart_at_ns = now + int64_t(d.backoff_s * 1e9);
    }
  }
  if (!d.daemon && now >= d.restart_at_ns) {
    try {
      prepare_directories(d);
      start_daemon(d);
      d.restarts++;
      log_info(d.gpu.uuid, ": MPS control daemon restarted (pid ", d.daemon->process().pid, ")");
    } catch (const std::exception& e) {
      d.error = e.what();
      d.backoff_s =
          std::min(std::max(d.backoff_s * 2, options_.backoff_initial_s), options_.backoff_max_s);
      d.restart_at_ns = now + int64_t(d.backoff_s * 1e9);
      log_warn(d.gpu.uuid, ": cannot restart the MPS control daemon: ", d.error);
    }
  }
  seen.index = d.gpu.index;
  seen.uuid = d.gpu.uuid;
  seen.restarts = d.restarts;
  if (d.daemon) {
    seen.daemon_pid = d.daemon->process().pid;
    try {
      seen.servers = d.daemon->server_pids(5);
      seen.clients = d.daemon->client_pids();
      seen.answering = true;
      d.backoff_s = 0;
    } catch (const RuntimeFailure& e) {
      d.error = e.what();
    }
  }
  seen.error = seen.answering ? "" : d.error;
  seen.memory = gpu_processes(d.gpu.uuid);
}

void NodeAgent::run_monitor() {
  while (true) {
    AgentSnapshot next;
    for (Daemon& d : daemons_) {
      AgentGpu seen;
      check(d, seen);
      next.gpus.push_back(std::move(seen));
    }
    next.checked_ns = monotonic_ns();
    std::unique_lock lock(mutex_);
    snapshot_ = std::move(next);
    if (wake_.wait_for(lock, std::chrono::duration<double>(options_.check_interval_s),
                       [&] { return stopping_; }))
      return;
  }
}

AgentSnapshot NodeAgent::snapshot() const {
  std::lock_guard lock(mutex_);
  return snapshot_;
}

bool NodeAgent::ready() const {
  std::lock_guard lock(mutex_);
  return !snapshot_.gpus.empty() && std::all_of(snapshot_.gpus.begin(), snapshot_.gpus.end(),
                                                [](const AgentGpu& g) { return g.answering; });
}

std::optional<MpsDaemon> NodeAgent::daemon_of(const std::string& uuid, std::string& why) const {
  std::lock_guard lock(mutex_);
  for (const Daemon& d : daemons_) {
    if (d.gpu.uuid != uuid) continue;
    if (d.daemon) return MpsDaemon(d.daemon->config(), d.daemon->process());
    why = "the MPS control daemon of " + uuid + " is down (" + d.error + ")";
    return std::nullopt;
  }
  std::string served;
  for (const Daemon& d : daemons_) served += (served.empty() ? "" : ", ") + d.gpu.uuid;
  why = "this node's agent serves no GPU " + uuid + " (it serves " + served + ")";
  return std::nullopt;
}

Json NodeAgent::answer(const Json& request, pid_t asker) const {
  std::string op = request.value("op", "");
  std::string uuid = request.value("gpu", "");
  std::string why;
  std::optional<MpsDaemon> daemon = daemon_of(uuid, why);
  if (op == "ready") {
    if (!daemon) return {{"ok", false}, {"error", why}};
    try {
      daemon->server_pids(5);
    } catch (const RuntimeFailure& e) {
      return {{"ok", false}, {"error", e.what()}};
    }
    return {{"ok", true}};
  }
  if (op == "client") {
    if (!request.contains("pid") || !request["pid"].is_number_integer()) {
      return {{"ok", false}, {"error", "'pid' must be the process id as the asker sees it"}};
    }
    if (!daemon) return {{"ok", false}, {"error", why}};
    pid_t pid = request["pid"].get<pid_t>();
    std::optional<pid_t> host = find_in_tree_by_namespace_pid(asker, pid);
    if (!host) {
      return {{"ok", false},
              {"error", "process " + std::to_string(pid) + " is not the asker's (pid " +
                            std::to_string(asker) + " here) nor one of its descendants"}};
    }
    if (!daemon->attached(*host)) {
      return {
          {"ok", false},
          {"error", "host pid " + std::to_string(*host) +
                        " and its descendants are not among the " + "clients of the MPS server"}};
    }
    return {{"ok", true}, {"host_pid", *host}};
  }
  return {{"ok", false}, {"error", "unknown op '" + op + "'; ask ready or client"}};
}

}  // namespace gpufrac::k8s
