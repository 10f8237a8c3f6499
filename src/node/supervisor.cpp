#include "node/supervisor.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/clock.h"
#include "common/error.h"
#include "common/http_client.h"
#include "common/json.h"
#include "common/log.h"
#include "node/engine_port.h"

namespace gpufrac {
namespace {

std::string log_tail(const std::string& path, size_t bytes = 600) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  std::string all = text.str();
  std::string tail = all.size() > bytes ? all.substr(all.size() - bytes) : all;
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  std::string one_line;
  for (char c : tail) {
    if (c == '\n') one_line += " | ";
    else one_line += c;
  }
  return one_line.empty() ? "(empty log)" : one_line;
}

bool killed_from_outside(int wait_status) {
  if (!WIFSIGNALED(wait_status)) return false;
  int sig = WTERMSIG(wait_status);
  return sig == SIGKILL || sig == SIGTERM || sig == SIGINT;
}

}  // namespace

std::vector<std::string> engine_key_header(const std::string& engine_key) {
  if (engine_key.empty()) return {};
  return {"Authorization: Bearer " + engine_key};
}

std::string served_model_name(const std::string& base_url, const std::string& engine_key) {
  HttpReply reply = http_get(base_url + "/v1/models", 2, engine_key_header(engine_key));
  if (!reply.ok()) return {};
  Json models = Json::parse(reply.body, nullptr, false);
  if (models.is_discarded() || !models.contains("data") || !models["data"].is_array() ||
      models["data"].empty() || !models["data"][0].contains("id") || !models["data"][0]["id"].is_string()) {
    return {};
  }
  return models["data"][0]["id"].get<std::string>();
}

std::string_view instance_state_name(InstanceState state) {
  switch (state) {
    case InstanceState::kStarting: return "starting";
    case InstanceState::kReady: return "ready";
    case InstanceState::kRestarting: return "restarting";
    case InstanceState::kStopping: return "stopping";
    case InstanceState::kStopped: return "stopped";
    case InstanceState::kFailed: return "failed";
  }
  return "?";
}

Supervisor::Supervisor(std::vector<SupervisedInstance> instances, SupervisorOptions options,
                       ChangeCallback on_change, VerifyCallback verify, FatalCallback on_fatal)
    : options_(options),
      on_change_(std::move(on_change)),
      verify_(std::move(verify)),
      on_fatal_(std::move(on_fatal)) {
  for (SupervisedInstance& spec : instances) {
    Instance x;
    x.status.name = spec.name;
    x.status.model = spec.model;
    x.status.replica = spec.replica;
    x.status.port = spec.plan.port;
    x.status.url = spec.plan.base_url;
    x.status.log_path = spec.plan.log_path;
    x.spec = std::move(spec);
    published_.push_back(x.status);
    instances_.push_back(std::move(x));
  }
}

Supervisor::~Supervisor() { stop_all(); }

std::vector<InstanceStatus> Supervisor::snapshot() const {
  std::lock_guard lock(mutex_);
  return published_;
}

void Supervisor::publish(Instance& x) {
  {
    std::lock_guard lock(mutex_);
    published_[size_t(&x - instances_.data())] = x.status;
  }
  if (on_change_) on_change_(x.status);
}

void Supervisor::start_all() {
  for (Instance& x : instances_) {
    std::filesystem::create_directories(std::filesystem::path(x.spec.plan.log_path).parent_path());
  }
  try {
    for (Instance& x : instances_) launch(x);
  } catch (const std::exception& e) {
    stop_all();
    throw RuntimeFailure(e.what());
  }
  monitor_ = std::thread([this] { run_monitor(); });
  std::string error;
  {
    std::unique_lock lock(mutex_);
    wake_.wait(lock, [&] {
      bool all_ready = std::all_of(published_.begin(), published_.end(), [](const InstanceStatus& s) {
        return s.state == InstanceState::kReady;
      });
      return all_ready || !startup_error_.empty();
    });
    error = startup_error_;
    if (error.empty()) starting_ = false;
  }
  if (!error.empty()) {
    stop_all();
    throw RuntimeFailure(error + "; nothing is left running");
  }
}

void Supervisor::restart_group(int fault_group, const std::string& why) {
  std::lock_guard lock(mutex_);
  group_requests_.emplace_back(fault_group, why);
  wake_.notify_all();
}

void Supervisor::run_monitor() {
  while (true) {
    {
      std::unique_lock lock(mutex_);
      if (stop_) return;
    }
    tick();
    std::unique_lock lock(mutex_);
    if (stop_) return;
    wake_.wait_for(lock, std::chrono::milliseconds(50), [&] { return stop_ || !group_requests_.empty(); });
  }
}

void Supervisor::tick() {
  std::vector<std::pair<int, std::string>> requests;
  {
    std::lock_guard lock(mutex_);
    requests.swap(group_requests_);
  }
  for (const auto& [group, why] : requests) {
    for (Instance& x : instances_) {
      bool running = x.status.state == InstanceState::kStarting || x.status.state == InstanceState::kReady;
      if (x.spec.fault_group != group || !running) continue;
      stop_group_members(group, x, why);
      stop_process_group(x.status.process, options_.stop_grace_s, true);
      schedule_restart(x, why);
      break;
    }
  }
  for (Instance& x : instances_) {
    switch (x.status.state) {
      case InstanceState::kStarting:
      case InstanceState::kReady:
        if (std::optional<int> status = reap_child(x.status.process.pid)) {
          on_exit(x, *status);
        } else if (x.status.state == InstanceState::kStarting) {
          check_startup(x);
        }
        break;
      case InstanceState::kRestarting:
        if (monotonic_ns() >= x.restart_at_ns) {
          try {
            move_to_fresh_port(x);
            launch(x);
          } catch (const std::exception& e) {
            schedule_restart(x, e.what());
          }
        }
        break;
      default:
        break;
    }
  }
}

void Supervisor::move_to_fresh_port(Instance& x) {
  if (!x.spec.plan_on_port) return;
  EnginePortReservation port = reserve_engine_port();
  x.spec.plan = x.spec.plan_on_port(port.port());
  x.status.port = x.spec.plan.port;
  x.status.url = x.spec.plan.base_url;
}

void Supervisor::launch(Instance& x) {
  {
    std::ofstream log(x.spec.plan.log_path, std::ios::app);
    log << "[gpufrac node] starting " << x.spec.name << " (start " << x.status.restarts + 1 << "):";
    for (const std::string& arg : x.spec.plan.argv) log << " " << arg;
    log << "\n";
  }
  SpawnOptions options;
  options.argv = x.spec.plan.argv;
  options.env = x.spec.plan.env;
  options.log_path = x.spec.plan.log_path;
  options.cpus = x.spec.plan.cpus;
  options.data_limit_bytes = x.spec.plan.data_limit_bytes;
  x.status.process = spawn_process(options);
  x.status.state = InstanceState::kStarting;
  x.started_ns = monotonic_ns();
  x.next_health_ns = x.started_ns;
  log_info("model ", x.spec.name, ": started pid ", x.status.process.pid, " on port ", x.spec.plan.port);
  publish(x);
}

void Supervisor::check_startup(Instance& x) {
  int64_t now = monotonic_ns();
  if (now - x.started_ns > int64_t(x.spec.startup_timeout_s * 1e9)) {
    stop_process_group(x.status.process, options_.stop_grace_s, true);
    std::string why = "model '" + x.spec.name + "' did not become healthy at " +
                      x.spec.plan.health_url + " within " +
                      std::to_string(int(x.spec.startup_timeout_s)) + " s; its log ends: " +
                      log_tail(x.spec.plan.log_path);
    if (starting_) fail(why);
    else count_failure(x, "startup timed out");
    return;
  }
  if (now < x.next_health_ns) return;
  x.next_health_ns = now + int64_t(options_.health_interval_s * 1e9);
  if (http_get(x.spec.plan.health_url, 1, engine_key_header(x.spec.plan.engine_key)).status != 200)
    return;
  x.status.served_name = served_model_name(x.spec.plan.base_url, x.spec.plan.engine_key);
  std::string refusal = verify_ ? verify_(x.status) : "";
  if (!refusal.empty()) {
    stop_process_group(x.status.process, options_.stop_grace_s, true);
    x.status.state = InstanceState::kStopped;
    x.status.reason = refusal;
    publish(x);
    if (starting_) {
      fail(refusal);
    } else {
      {
        std::lock_guard lock(mutex_);
        stop_ = true;  // nothing more may start; the node takes everything down
      }
      if (on_fatal_) on_fatal_(refusal);
    }
    return;
  }
  x.status.state = InstanceState::kReady;
  x.status.reason.clear();
  x.ready_since_ns = now;
  log_info("model ", x.spec.name, ": ready at ", x.spec.plan.base_url);
  publish(x);
  std::lock_guard lock(mutex_);
  wake_.notify_all();
}

void Supervisor::on_exit(Instance& x, int wait_status) {
  // Whatever the engine had started (workers holding GPU memory or its port) goes with it.
  signal_process_group(x.status.process, SIGKILL);
  x.status.last_exit = describe_wait_status(wait_status);
  std::string why = "model '" + x.spec.name + "' (pid " + std::to_string(x.status.process.pid) +
                    ") exited: " + x.status.last_exit;
  log_warn(why);
  if (starting_) {
    fail(why + "; its log ends: " + log_tail(x.spec.plan.log_path));
    x.status.state = InstanceState::kStopped;
    publish(x);
    return;
  }
  bool possible_gpu_fault = x.spec.fault_group >= 0 && !killed_from_outside(wait_status);
  if (possible_gpu_fault) {
    stop_group_members(x.spec.fault_group, x,
                       "co-tenant '" + x.spec.name + "' on the same GPU died (" + x.status.last_exit + ")");
  }
  count_failure(x, x.status.last_exit);
}

bool Supervisor::healthy_long_enough(const Instance& x, int64_t now) const {
  return x.ready_since_ns && now - x.ready_since_ns > int64_t(options_.healthy_reset_s * 1e9);
}

void Supervisor::count_failure(Instance& x, const std::string& why) {
  x.status.failures = healthy_long_enough(x, monotonic_ns()) ? 1 : x.status.failures + 1;
  if (x.spec.failure_limit <= 0 || x.status.failures < x.spec.failure_limit) {
    schedule_restart(x, why);
    return;
  }
  x.status.state = InstanceState::kFailed;
  x.status.reason =
      "failed " + std::to_string(x.status.failures) + " times in a row (last: " + why +
      "); not restarted: fix it (its log: " + x.spec.plan.log_path + ") and start the node again";
  log_error("model ", x.spec.name, ": ", x.status.reason);
  publish(x);
}

void Supervisor::stop_group_members(int group, const Instance& except, const std::string& why) {
  std::vector<Instance*> members;
  for (Instance& y : instances_) {
    if (&y == &except || y.spec.fault_group != group) continue;
    if (y.status.state != InstanceState::kStarting && y.status.state != InstanceState::kReady) continue;
    members.push_back(&y);
    y.status.state = InstanceState::kStopping;
    publish(y);  // the router stops sending to it at once
    signal_process_group(y.status.process, SIGTERM);
  }
  for (Instance* y : members) {
    stop_process_group(y->status.process, options_.stop_grace_s, true);
    y->status.last_exit = "stopped with its GPU's MPS clients";
    schedule_restart(*y, why);
  }
  log_warn("GPU fault group ", group, ": restarting ", members.size() + 1, " MPS client(s): ", why);
}

void Supervisor::schedule_restart(Instance& x, const std::string& why) {
  int64_t now = monotonic_ns();
  x.backoff_s = (x.backoff_s == 0 || healthy_long_enough(x, now))
                    ? options_.backoff_initial_s
                    : std::min(options_.backoff_max_s, x.backoff_s * 2);
  x.status.backoff_s = x.backoff_s;
  x.ready_since_ns = 0;
  x.restart_at_ns = now + int64_t(x.backoff_s * 1e9);
  // A fault group restarts together: nobody comes back before the last member may.
  for (Instance& y : instances_) {
    if (x.spec.fault_group >= 0 && y.spec.fault_group == x.spec.fault_group &&
        y.status.state == InstanceState::kRestarting) {
      int64_t together = std::max(y.restart_at_ns, x.restart_at_ns);
      y.restart_at_ns = x.restart_at_ns = together;
    }
  }
  x.status.restarts++;
  x.status.state = InstanceState::kRestarting;
  x.status.reason = why;
  log_info("model ", x.spec.name, ": restart ", x.status.restarts, " in ", x.backoff_s, " s (", why, ")");
  publish(x);
}

void Supervisor::fail(const std::string& message) {
  std::lock_guard lock(mutex_);
  if (startup_error_.empty()) startup_error_ = message;
  wake_.notify_all();
}

void Supervisor::stop_all() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    wake_.notify_all();
  }
  if (monitor_.joinable()) monitor_.join();
  std::vector<Instance*> running;
  for (Instance& x : instances_) {
    if (x.status.state == InstanceState::kStopped) continue;
    if (x.status.process.valid() && process_group_alive(x.status.process)) {
      running.push_back(&x);
      x.status.state = InstanceState::kStopping;
      publish(x);
      signal_process_group(x.status.process, SIGTERM);
    } else {
      if (x.status.process.valid()) {
        reap_child(x.status.process.pid);
        signal_process_group(x.status.process, SIGKILL);
      }
      x.status.state = InstanceState::kStopped;
      publish(x);
    }
  }
  for (Instance* x : running) {
    stop_process_group(x->status.process, options_.stop_grace_s, true);
    x->status.state = InstanceState::kStopped;
    publish(*x);
  }
}

}  // namespace gpufrac
