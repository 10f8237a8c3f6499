#include "k8s/cluster_router.h"

#include <cstdlib>

#include "common/api_key.h"
#include "common/error.h"
#include "common/log.h"
#include "common/strings.h"
#include "node/supervisor.h"

namespace gpufrac::k8s {
namespace {

std::vector<RouterModel> router_models(const std::vector<Upstream>& upstreams,
                                       double restart_wait_s) {
  std::vector<RouterModel> models;
  for (const Upstream& u : upstreams) {
    RouterModel model;
    model.name = u.model;
    model.restart_wait_s = restart_wait_s;
    model.api_keys = u.api_keys;
    model.max_requests_in_flight = u.max_requests_in_flight;
    model.requests_per_second = u.requests_per_second;
    models.push_back(model);
  }
  return models;
}

}  // namespace

std::vector<Upstream> parse_upstreams(const std::vector<std::string>& values) {
  if (values.empty())
    throw UsageError(
        "--upstream: give one per model, like --upstream qwen-a=http://demo-qwen-a:8000/health");
  std::vector<Upstream> upstreams;
  for (const std::string& value : values) {
    size_t equals = value.find('=');
    if (equals == std::string::npos || equals == 0) {
      throw UsageError("--upstream: '" + value +
                       "' is not NAME=URL, like qwen-a=http://demo-qwen-a:8000/health");
    }
    Upstream u;
    u.model = value.substr(0, equals);
    u.health_url = value.substr(equals + 1);
    u.url = parse_http_url(u.health_url, "--upstream " + u.model);
    u.base_url = "http://" + http_authority(u.url.host, u.url.port);
    for (const Upstream& other : upstreams) {
      if (other.model == u.model)
        throw UsageError("--upstream: model '" + u.model + "' is given twice; give it once");
    }
    upstreams.push_back(std::move(u));
  }
  return upstreams;
}

namespace {

// "NAME=VALUE" of `flag`, with NAME one of the upstreams: that upstream and the value.
std::pair<Upstream*, std::string> model_value(std::vector<Upstream>& upstreams,
                                              const std::string& flag, const std::string& value,
                                              const char* example) {
  size_t equals = value.find('=');
  if (equals == std::string::npos || equals == 0 || equals + 1 == value.size()) {
    throw UsageError(flag + ": '" + value + "' is not MODEL=VALUE, like " + example);
  }
  std::string model = value.substr(0, equals);
  for (Upstream& u : upstreams) {
    if (u.model == model) return {&u, value.substr(equals + 1)};
  }
  throw UsageError(flag + ": no --upstream is named '" + model + "'; name one of the models");
}

}  // namespace

void apply_access_flags(std::vector<Upstream>& upstreams, const UpstreamAccessFlags& flags) {
  for (const std::string& value : flags.api_keys_env) {
    auto [upstream, variable] =
        model_value(upstreams, "--api-keys-env", value, "qwen-a=QWEN_A_KEYS");
    std::string source = "--api-keys-env " + upstream->model + ": $" + variable;
    const char* text = std::getenv(variable.c_str());
    std::vector<std::string> keys =
        text ? parse_api_keys(text, source) : std::vector<std::string>{};
    if (keys.empty()) {
      throw UsageError(source + " is " + (text ? "empty" : "not set") +
                       "; set it from the Secret with the model's keys (separated by commas)");
    }
    upstream->api_keys.insert(upstream->api_keys.end(), keys.begin(), keys.end());
  }
  for (const std::string& value : flags.max_requests_in_flight) {
    auto [upstream, text] = model_value(upstreams, "--max-requests-in-flight", value, "qwen-a=32");
    int64_t n = parse_int(text, "--max-requests-in-flight " + upstream->model);
    if (n < 1 || n > (1 << 20))
      throw UsageError("--max-requests-in-flight " + upstream->model + ": must be 1..1048576");
    upstream->max_requests_in_flight = int(n);
  }
  for (const std::string& value : flags.requests_per_second) {
    auto [upstream, text] = model_value(upstreams, "--requests-per-second", value, "qwen-a=10");
    double rate = parse_double(text, "--requests-per-second " + upstream->model);
    if (!(rate >= 1e-3 && rate <= 1e6))
      throw UsageError("--requests-per-second " + upstream->model + ": must be 0.001..1000000");
    upstream->requests_per_second = rate;
  }
  for (const Upstream& u : upstreams) {
    if (u.api_keys.empty() != upstreams[0].api_keys.empty()) {
      const Upstream& keyless = u.api_keys.empty() ? u : upstreams[0];
      throw UsageError("--api-keys-env: the model '" + keyless.model +
                       "' has no keys while others have; give every model its keys, or none");
    }
  }
}

ClusterRouter::ClusterRouter(HttpServerOptions listen, std::vector<Upstream> upstreams,
                             double poll_interval_s, double restart_wait_s)
    : upstreams_(std::move(upstreams)),
      poll_interval_s_(poll_interval_s),
      router_(listen, router_models(upstreams_, restart_wait_s)) {}

ClusterRouter::~ClusterRouter() {
  stop();
}

void ClusterRouter::start() {
  router_.start();
  watcher_ = std::thread([this] { watch(); });
}

void ClusterRouter::stop(double drain_timeout_s) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  router_.begin_drain();
  if (!router_.wait_idle(drain_timeout_s))
    log_warn("router: ", router_.in_flight(), " request(s) still in flight");
  router_.stop();
}

void ClusterRouter::watch() {
  std::vector<bool> ready(upstreams_.size(), false);
  while (true) {
    for (size_t i = 0; i < upstreams_.size(); ++i) {
      const Upstream& u = upstreams_[i];
      HttpReply reply = http_get(u.health_url, 2);
      bool now_ready = reply.status == 200;
      if (now_ready != ready[i]) {
        log_info("router: model '", u.model, "' is ", now_ready ? "ready" : "not ready", " (",
                 u.health_url, ": ", reply.status ? std::to_string(reply.status) : reply.error,
                 ")");
      }
      ready[i] = now_ready;
      ReplicaState state;
      state.host = u.url.host;
      state.port = u.url.port;
      state.ready = now_ready;
      state.state = now_ready ? "ready" : "starting";
      if (now_ready) state.served_name = served_model_name(u.base_url);
      router_.set_replica(u.model, 0, state);
    }
    std::unique_lock lock(mutex_);
    if (wake_.wait_for(lock, std::chrono::duration<double>(poll_interval_s_),
                       [&] { return stopping_; }))
      return;
  }
}

}  // namespace gpufrac::k8s
