#include "node/node.h"

#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "common/api_key.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "node/engine_port.h"
#include "node/gpus.h"
#include "node/model_keys.h"
#include "node/node_state.h"

namespace gpufrac {
namespace {

// A client registers with MPS when it initialises CUDA, before its engine reports healthy; the
// control daemon may list it a moment later.
constexpr double kAttachGrace_s = 5;

std::string this_executable() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "gpufrac" : self.string();
}

// Processes a previous node of this run directory recorded and that still run (its node process
// was killed, and nobody ran `gpufrac down`): a new node would lose track of them.
std::string leftovers_of_previous_node(const Json& state) {
  if (state.is_null()) return {};
  std::string left;
  auto check = [&](const Json& entry, const std::string& what) {
    ProcessId p{pid_t(entry.value("pid", 0)), entry.value("start_time", uint64_t(0))};
    if (p.valid() && process_group_alive(p)) left += (left.empty() ? "" : ", ") + what + " (pid " + std::to_string(p.pid) + ")";
  };
  for (const Json& m : state.value("models", Json::array())) check(m, "model " + m.value("name", "?"));
  for (const Json& d : state.value("mps", Json::array())) check(d, "the MPS daemon of GPU " + d.value("gpu", "?"));
  return left;
}

}  // namespace

std::unique_ptr<Node> Node::up(const NodeSpec& spec, NodeOptions options) {
  std::unique_ptr<Node> node(new Node());
  node->options_ = std::move(options);
  if (node->options_.gpufrac_binary.empty()) node->options_.gpufrac_binary = this_executable();
  node->options_.supervisor.stop_grace_s = spec.stop_timeout_s;
  node->start(spec);
  return node;
}

Node::~Node() { down(); }

void Node::start(const NodeSpec& spec) {
  spec_ = spec;
  run_dir_ = std::filesystem::absolute(resolve_run_dir(spec)).string();
  // Everything that can be checked before starting anything: placement, launch plans, ports.
  MachineInventory machine = discover_machine();
  placement_ = place_models(spec, select_devices(spec, machine));
  std::string memcap = find_memcap_library(spec, options_.gpufrac_binary);
  LaunchContext context;
  context.gpufrac_binary = options_.gpufrac_binary;
  context.memcap_library = memcap;
  context.run_dir = run_dir_;
  // Engines listen on loopback, where any process of the host could reach them: they require
  // this node's own key, which only the router (and the node's health checks) send.
  context.engine_key = random_api_key();
  context.withheld_variables = key_variables(spec);
  std::vector<RouterModel> router_models;
  for (size_t m = 0; m < spec.models.size(); ++m) {
    const ModelSpec& model = spec.models[m];
    RouterModel r{model.name, model.replicas, model.builtin(), model.restart_wait_s,
                  model.queue_limit};
    r.api_keys = resolve_model_keys(spec, m);
    r.max_requests_in_flight = model.max_requests_in_flight;
    r.requests_per_second = model.requests_per_second;
    router_models.push_back(std::move(r));
  }
  bool any_fractions_gpu = false;
  for (size_t d = 0; d < placement_.devices.size(); ++d) {
    const PlacementDevice& device = placement_.devices[d];
    bool used = std::any_of(placement_.instances.begin(), placement_.instances.end(),
                            [&](const PlacedInstance& i) { return i.device_index == d; });
    MpsDaemonConfig config;
    if (used && !device.is_cpu() && device.mode == SharingMode::kFractions) {
      std::string dir = run_dir_ + "/mps/gpu" + device.id;
      config = {find_mps_control(spec.mps_control), device.uuid, dir + "/pipe", dir + "/log"};
      any_fractions_gpu = true;
      context.mps_client_env.push_back(MpsDaemon(config, {}).client_env());
    } else {
      context.mps_client_env.emplace_back();
    }
    mps_configs_.push_back(config);
  }
  if (any_fractions_gpu && memcap.empty()) {
    log_warn(kMemcapLibraryName, " not found: fractions models are capped by MPS alone (their `total` "
             "memory still reads as the whole GPU)");
  }
  std::vector<SupervisedInstance> supervised;
  // Held until the engines start, so that no other node draws them meanwhile.
  std::vector<EnginePortReservation> engine_ports;
  for (const PlacedInstance& instance : placement_.instances) {
    const ModelSpec& model = spec.models[instance.model_index];
    SupervisedInstance s;
    s.name = instance.instance_name;
    s.model = model.name;
    s.replica = instance.replica;
    engine_ports.push_back(reserve_engine_port());
    s.plan = plan_launch(spec, placement_, instance, engine_ports.back().port(), context);
    s.plan_on_port = [this, instance, context](int port) {
      return plan_launch(spec_, placement_, instance, port, context);
    };
    s.startup_timeout_s = model.startup_timeout_s;
    s.failure_limit = model.failure_limit;
    const PlacementDevice& device = placement_.devices[instance.device_index];
    if (!device.is_cpu() && device.mode == SharingMode::kFractions) s.fault_group = int(instance.device_index);
    supervised.push_back(std::move(s));
  }

  lock_fd_ = lock_run_dir(run_dir_, spec.name);
  if (std::string left = leftovers_of_previous_node(read_node_state(run_dir_)); !left.empty()) {
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw RuntimeFailure("the previous node in " + run_dir_ + " left " + left +
                         " running; stop them with gpufrac down --run-dir " + run_dir_ + " first");
  }
  std::filesystem::create_directories(run_dir_ + "/logs");
  try {
    write_key_file(run_dir_ + "/engine-key", context.engine_key);
    router_ = std::make_unique<Router>(HttpServerOptions{spec.listen_host, spec.listen_port},
                                       std::move(router_models), context.engine_key);
    router_->start();
    url_ = "http://" + spec.listen_host + ":" + std::to_string(router_->port());
    save_state();
    start_mps_daemons();
    supervisor_ = std::make_unique<Supervisor>(
        std::move(supervised), options_.supervisor,
        [this](const InstanceStatus& status) { on_instance_change(status); },
        [this](const InstanceStatus& status) { return verify_client(status); },
        [this](const std::string& error) {
          std::lock_guard lock(mutex_);
          error_ = error;
          stop_requested_ = true;
          wake_.notify_all();
        });
    for (EnginePortReservation& port : engine_ports) port.release();
    supervisor_->start_all();
    std::vector<std::string> fractions_uuids;
    std::vector<int> groups;
    for (size_t d = 0; d < placement_.devices.size(); ++d) {
      if (!mps_[d]) continue;
      fractions_uuids.push_back(placement_.devices[d].uuid);
      groups.push_back(int(d));
    }
    fault_watcher_ = std::make_unique<GpuFaultWatcher>(fractions_uuids, [this, groups](size_t k, uint64_t xid) {
      supervisor_->restart_group(groups[k], "GPU reported Xid " + std::to_string(xid));
    });
    {
      std::lock_guard lock(mutex_);
      phase_ = "running";
    }
    save_state();
    log_info("node '", spec.name, "' up at ", url_, " with ", placement_.instances.size(), " model instance(s)");
  } catch (const std::exception& e) {
    cleanup_after_failure(e.what());
    throw;
  }
}

void Node::start_mps_daemons() {
  mps_.resize(placement_.devices.size());
  for (size_t d = 0; d < placement_.devices.size(); ++d) {
    if (mps_configs_[d].control_program.empty()) continue;
    mps_[d] = MpsDaemon::start(mps_configs_[d]);
    save_state();
  }
}

std::string Node::verify_client(const InstanceStatus& status) const {
  for (size_t i = 0; i < placement_.instances.size(); ++i) {
    const PlacedInstance& instance = placement_.instances[i];
    if (instance.instance_name != status.name) continue;
    const MpsDaemon* daemon = mps_[instance.device_index].get();
    if (!daemon) return "";
    int64_t deadline = monotonic_ns() + int64_t(kAttachGrace_s * 1e9);
    while (true) {
      try {
        if (daemon->attached(status.process.pid)) return "";
      } catch (const RuntimeFailure& e) {
        return "cannot ask GPU " + placement_.devices[instance.device_index].id + "'s MPS daemon about model '" +
               status.name + "': " + e.what();
      }
      if (monotonic_ns() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return "model '" + status.name + "' (pid " + std::to_string(status.process.pid) +
           ") is not an MPS client of GPU " + placement_.devices[instance.device_index].id +
           "'s daemon (pipe " + daemon->config().pipe_dir + "): it would run on the whole GPU " +
           "without its SM and memory limits, so the node is going down; make sure its command " +
           "keeps CUDA_MPS_PIPE_DIRECTORY";
  }
  return "";
}

void Node::on_instance_change(const InstanceStatus& status) {
  if (router_) {
    ReplicaState replica;
    replica.port = status.port;
    replica.ready = status.state == InstanceState::kReady;
    replica.failed = status.state == InstanceState::kFailed;
    replica.state = std::string(instance_state_name(status.state));
    if (replica.failed) replica.state += ": " + status.reason;
    replica.served_name = status.served_name;
    replica.restarts = status.restarts;
    router_->set_replica(status.model, status.replica, replica);
  }
  save_state();
}

Json Node::state() const {
  std::vector<InstanceStatus> statuses;
  if (supervisor_) statuses = supervisor_->snapshot();
  Json devices = Json::array();
  for (const PlacementDevice& d : placement_.devices) {
    devices.push_back({{"id", d.id}, {"uuid", d.uuid}, {"name", d.name},
                       {"mode", sharing_mode_name(d.mode)}, {"memory_bytes", d.memory_bytes},
                       {"sm_count", d.sm_count}});
  }
  Json mps = Json::array();
  for (size_t d = 0; d < mps_.size(); ++d) {
    if (!mps_[d]) continue;
    const MpsDaemonConfig& c = mps_[d]->config();
    mps.push_back({{"gpu", placement_.devices[d].id}, {"uuid", c.gpu_uuid}, {"pid", mps_[d]->process().pid},
                   {"start_time", mps_[d]->process().start_time}, {"control", c.control_program},
                   {"pipe_dir", c.pipe_dir}, {"log_dir", c.log_dir}});
  }
  Json models = Json::array();
  for (size_t i = 0; i < placement_.instances.size(); ++i) {
    const PlacedInstance& p = placement_.instances[i];
    const PlacementDevice& d = placement_.devices[p.device_index];
    Json m = {{"name", p.instance_name}, {"model", spec_.models[p.model_index].name},
              {"replica", p.replica}, {"gpu", d.id}, {"gpu_uuid", d.uuid},
              {"mode", sharing_mode_name(p.mode)}, {"sm_percent", p.sm_percent},
              {"compute_share", p.compute_share}, {"cpus", p.cpus},
              {"memory_cap_bytes", p.memory_cap_bytes}, {"state", "pending"}, {"restarts", 0}};
    if (p.elastic_memory) m["memory_floor_bytes"] = p.memory_floor_bytes;
    if (i < statuses.size()) {
      const InstanceStatus& s = statuses[i];
      m["port"] = s.port;
      m["url"] = s.url;
      m["state"] = instance_state_name(s.state);
      m["restarts"] = s.restarts;
      m["failures"] = s.failures;
      m["backoff_s"] = s.backoff_s;
      m["pid"] = s.process.pid;
      m["start_time"] = s.process.start_time;
      m["last_exit"] = s.last_exit;
      m["reason"] = s.reason;
      m["served_name"] = s.served_name;
      m["log"] = s.log_path;
    }
    models.push_back(std::move(m));
  }
  ProcessId self = process_identity(::getpid());
  std::lock_guard lock(mutex_);
  return {{"schema", "gpufrac.node/1"}, {"name", spec_.name}, {"spec", options_.spec_path},
          {"run_dir", run_dir_}, {"url", url_}, {"state", phase_}, {"error", error_},
          {"drain_timeout_s", spec_.drain_timeout_s}, {"stop_timeout_s", spec_.stop_timeout_s},
          {"node", {{"pid", self.pid}, {"start_time", self.start_time}}},
          {"devices", devices}, {"mps", mps}, {"models", models}};
}

void Node::save_state() {
  Json snapshot = state();
  std::lock_guard lock(mutex_);
  if (lock_fd_ < 0) return;  // the run directory is no longer ours
  try {
    write_node_state(run_dir_, snapshot);
  } catch (const RuntimeFailure& e) {
    log_warn(e.what());
  }
}

bool Node::wait_for_stop(double timeout_s) {
  std::unique_lock lock(mutex_);
  return wake_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return stop_requested_; });
}

std::string Node::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

void Node::request_stop() {
  std::lock_guard lock(mutex_);
  stop_requested_ = true;
  wake_.notify_all();
}

void Node::cleanup_after_failure(const std::string& error) {
  {
    std::lock_guard lock(mutex_);
    error_ = error;
  }
  fault_watcher_.reset();
  if (supervisor_) supervisor_->stop_all();
  for (auto& daemon : mps_) {
    if (daemon) daemon->quit();
  }
  if (router_) router_->stop();
  {
    std::lock_guard lock(mutex_);
    phase_ = "failed";
    down_ = true;
  }
  save_state();
  if (lock_fd_ >= 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
  }
}

void Node::down() {
  {
    std::lock_guard lock(mutex_);
    if (down_) return;
    down_ = true;
    if (!router_) return;  // up() failed before anything started
    if (phase_ != "failed") phase_ = "stopping";
  }
  save_state();
  log_info("node '", spec_.name, "': draining (up to ", spec_.drain_timeout_s, " s)");
  router_->begin_drain();
  if (!router_->wait_idle(spec_.drain_timeout_s)) {
    log_warn("node '", spec_.name, "': ", router_->in_flight(), " request(s) still in flight after the drain timeout");
  }
  fault_watcher_.reset();
  supervisor_->stop_all();
  for (auto& daemon : mps_) {
    if (daemon) daemon->quit();
  }
  router_->stop();
  {
    std::lock_guard lock(mutex_);
    if (phase_ != "failed") phase_ = "stopped";
  }
  save_state();
  std::lock_guard lock(mutex_);
  ::close(lock_fd_);
  lock_fd_ = -1;
  log_info("node '", spec_.name, "' is down");
}

}  // namespace gpufrac
