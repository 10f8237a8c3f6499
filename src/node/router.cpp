#include "node/router.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "common/clock.h"
#include "common/http_client.h"
#include "common/json.h"
#include "common/log.h"
#include "node/engine_metrics_relay.h"
#include "node/request_model.h"

namespace gpufrac {
namespace {

// How long GET /metrics waits for each engine's /metrics (loopback; a stuck engine is left out).
constexpr double kEngineMetricsTimeoutS = 2;

void send_error(HttpResponse& response, int status, const std::string& message, const char* type,
                const char* param, const char* code, std::vector<std::string> headers = {}) {
  response.send(status, "application/json",
                openai_error_body(message, type, param ? param : "", code), std::move(headers));
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", seconds);
  return text;
}

}  // namespace

Router::Router(HttpServerOptions options, std::vector<RouterModel> models, std::string engine_key)
    : models_(models.size()),
      engine_key_(std::move(engine_key)),
      held_(
          models.size(),
          [this](const std::shared_ptr<RoutedRequest>& request) {
            Model& model = models_[request->model()];
            model.counters.failed_wait_timeout++;
            std::string state;
            {
              std::lock_guard lock(mutex_);
              state = state_of(model, monotonic_ns());
            }
            request->give_up(503,
                             "the model '" + model.config.name + "' has had no ready replica for " +
                                 seconds_text(model.config.restart_wait_s) + " (" + state +
                                 "); retry shortly",
                             "model_not_ready", {"Retry-After: 1"});
            done(request->model());
          },
          [this](const std::shared_ptr<RoutedRequest>& request) { done(request->model()); },
          [this] {
            for (size_t m = 0; m < models_.size(); ++m) release_held(m);
          }),
      server_(options) {
  for (size_t m = 0; m < models.size(); ++m) {
    models_[m].config = models[m];
    models_[m].replicas.resize(size_t(std::max(1, models[m].replicas)));
    models_[m].limit = std::make_unique<AdmissionLimit>(models[m].max_requests_in_flight,
                                                        models[m].requests_per_second);
    for (const std::string& key : models[m].api_keys) keys_.add(key, m);
  }
  server_.gate([this](const HttpRequest& request, HttpResponse& response) {
    return admit_key(request, response);
  });
  for (const char* path : {"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"}) {
    server_.route("POST", path,
                  [this](const HttpRequest& request, std::shared_ptr<HttpResponse> response) {
                    handle_model_request(request, std::move(response));
                  });
  }
  server_.route("GET", "/v1/models",
                [this](const HttpRequest& request, std::shared_ptr<HttpResponse> response) {
                  handle_models(request, std::move(response));
                });
  server_.route("GET", "/ping", [](const HttpRequest&, std::shared_ptr<HttpResponse> response) {
    response->send(200, "application/json", R"({"status":"ok"})");
  });
  server_.route("GET", "/health",
                [this](const HttpRequest&, std::shared_ptr<HttpResponse> response) {
                  handle_health(std::move(response));
                });
  server_.route("GET", "/metrics",
                [this](const HttpRequest&, std::shared_ptr<HttpResponse> response) {
                  handle_metrics(std::move(response));
                });
}

Router::~Router() {
  stop();
}

void Router::start() {
  server_.start();
}

void Router::stop() {
  stopping_ = true;
  for (size_t m = 0; m < models_.size(); ++m) {
    for (const auto& request : held_.take_all(m)) {
      request->give_up(503, "this node is shutting down", "node_draining");
      done(m);
    }
  }
  server_.stop();
}

void Router::begin_drain() {
  draining_ = true;
  for (size_t m = 0; m < models_.size(); ++m) release_held(m);  // answers them: draining
}

void Router::set_replica(const std::string& model, int replica, ReplicaState state) {
  ServerAddress upstream;
  std::string error;
  if (state.ready && !resolve_server_address(state.host, state.port, upstream, error)) {
    log_warn("router: model ", model, " replica ", replica, ": ", error);
    state.ready = false;
    state.state = error;
  }
  size_t index = models_.size();
  {
    std::lock_guard lock(mutex_);
    for (size_t m = 0; m < models_.size(); ++m) {
      Model& mm = models_[m];
      if (mm.config.name != model || replica < 0 || size_t(replica) >= mm.replicas.size()) continue;
      Replica& r = mm.replicas[size_t(replica)];
      r.state = std::move(state);
      r.upstream = std::move(upstream);
      r.avoid_until_ns = 0;  // the supervisor's word is newer than our last failure
      index = m;
    }
  }
  if (index < models_.size()) release_held(index);
}

bool Router::wait_idle(double timeout_s) const {
  int64_t deadline = monotonic_ns() + int64_t(timeout_s * 1e9);
  while (in_flight_.load() > 0) {
    if (monotonic_ns() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void Router::handle_model_request(const HttpRequest& request,
                                  std::shared_ptr<HttpResponse> response) {
  if (draining_ || stopping_) {
    send_error(*response, 503, "this node is shutting down; send the request elsewhere",
               "service_unavailable", nullptr, "node_draining");
    return;
  }
  RequestModelError why = RequestModelError::kNone;
  std::optional<RequestModel> requested = find_request_model(request.body, &why);
  if (!requested) {
    if (why == RequestModelError::kNotAnObject) {
      send_error(*response, 400, "the request body is not a JSON object", "invalid_request_error",
                 nullptr, "invalid_json");
    } else {
      send_error(*response, 400,
                 std::string(why == RequestModelError::kNotAString ? "'model' must be a string"
                                                                   : "'model' is required") +
                     ": name one of the models GET /v1/models lists",
                 "invalid_request_error", "model", "missing_model");
    }
    return;
  }
  ClientRequest client;
  client.model = models_.size();
  for (size_t m = 0; m < models_.size(); ++m) {
    if (models_[m].config.name == requested->name) client.model = m;
  }
  if (client.model == models_.size()) {
    send_error(*response, 404,
               "the model '" + requested->name +
                   "' does not exist on this node; GET /v1/models lists them",
               "invalid_request_error", "model", "model_not_found");
    return;
  }
  if (!admit_to_model(request, client.model, *response)) return;
  Model& model = models_[client.model];
  model.counters.requests++;
  client.model_name = requested->name;
  client.target = request.head.target;
  client.body = request.body;
  client.requested = *requested;
  client.resumable = model.config.resumable && client.target == "/v1/completions";
  client.headers.push_back("Content-Type: application/json");
  if (std::string_view accept = request.header("accept"); !accept.empty())
    client.headers.push_back("Accept: " + std::string(accept));
  // The client's key is for the router: an engine gets the node's key, or nothing.
  if (!engine_key_.empty()) {
    client.headers.push_back("Authorization: Bearer " + engine_key_);
  } else if (std::string_view authorization = request.header("authorization");
             keys_.empty() && !authorization.empty()) {
    client.headers.push_back("Authorization: " + std::string(authorization));
  }
  in_flight_++;
  route(RoutedRequest::create(*this, std::move(client), std::move(response)));
}

std::string Router::state_of(const Model& model, int64_t now) const {
  for (const Replica& r : model.replicas) {
    if (r.state.ready && r.avoid_until_ns > now) return "its engine failed a moment ago";
  }
  return model.replicas[0].state.state;
}

int Router::pick_replica(Model& model, int64_t now, bool& all_failed) {
  // The ready replica with the fewest requests in flight, starting after the last one chosen.
  int best = -1;
  all_failed = true;
  size_t count = model.replicas.size();
  for (size_t k = 0; k < count; ++k) {
    size_t i = (model.next + k) % count;
    const Replica& r = model.replicas[i];
    all_failed &= r.state.failed;
    if (!r.state.ready || r.avoid_until_ns > now) continue;
    if (best < 0 || r.in_flight < model.replicas[size_t(best)].in_flight) best = int(i);
  }
  return best;
}

void Router::route(const std::shared_ptr<RoutedRequest>& request) {
  Model& model = models_[request->model()];
  ServerAddress upstream;
  std::string served_name;
  int chosen = -1;
  bool all_failed = false;
  bool queue_full = false;
  std::string state;
  {
    std::lock_guard lock(mutex_);
    int64_t now = monotonic_ns();
    chosen = stopping_ ? -1 : pick_replica(model, now, all_failed);
    if (chosen >= 0) {
      model.next = (size_t(chosen) + 1) % model.replicas.size();
      Replica& replica = model.replicas[size_t(chosen)];
      replica.in_flight++;
      upstream = replica.upstream;
      served_name = replica.state.served_name;
      request->hold_deadline_ns = 0;
    } else if (!all_failed && !draining_ && !stopping_ && model.config.restart_wait_s > 0) {
      bool first_wait = request->hold_deadline_ns == 0;
      if (first_wait) request->hold_deadline_ns = now + int64_t(model.config.restart_wait_s * 1e9);
      if (held_.hold(request->model(), request, request->hold_deadline_ns,
                     model.config.queue_limit)) {
        if (first_wait) model.counters.held++;
        return;
      }
      model.counters.failed_queue_full++;
      queue_full = true;
    }
    state = state_of(model, now);
  }
  if (chosen >= 0) {
    request->send(proxy_, upstream, served_name, chosen);
  } else if (stopping_ || draining_) {
    request->give_up(503, "this node is shutting down; send the request elsewhere",
                     "node_draining");
    done(request->model());
  } else if (all_failed) {
    answer_failed(request, state);
  } else if (queue_full) {
    request->give_up(503,
                     "the model '" + model.config.name + "' is not ready and " +
                         std::to_string(model.config.queue_limit) +
                         " requests already wait for it; retry shortly",
                     "queue_full", {"Retry-After: 1"});
    done(request->model());
  } else {
    model.counters.failed_wait_timeout++;
    request->give_up(
        503, "the model '" + model.config.name + "' is not ready (" + state + "); retry shortly",
        "model_not_ready", {"Retry-After: 1"});
    done(request->model());
  }
}

void Router::answer_failed(const std::shared_ptr<RoutedRequest>& request, const std::string& why) {
  Model& model = models_[request->model()];
  model.counters.failed_model_failed++;
  request->give_up(503,
                   "the model '" + model.config.name + "' has failed and is not restarted (" + why +
                       "); see gpufrac status and its engine log",
                   "model_failed");
  done(request->model());
}

void Router::attempt_ended(const std::shared_ptr<RoutedRequest>& request, AttemptEnd end,
                           bool engine_failed) {
  Model& model = models_[request->model()];
  {
    std::lock_guard lock(mutex_);
    Replica& replica = model.replicas[size_t(request->replica())];
    replica.in_flight--;
    if (engine_failed) replica.avoid_until_ns = monotonic_ns() + kAvoidFailed_ns;
  }
  switch (end) {
    case AttemptEnd::kCompleted:
    case AttemptEnd::kClientGone:
      done(request->model());
      return;
    case AttemptEnd::kLost:
      model.counters.failed_engine++;
      done(request->model());
      return;
    case AttemptEnd::kRetry:
      model.counters.retried++;
      break;
    case AttemptEnd::kResume:
      model.counters.resumed++;
      break;
    case AttemptEnd::kRefused:
      break;
  }
  if (request->client_gone()) {
    done(request->model());
    return;
  }
  route(request);
}

void Router::release_held(size_t index) {
  Model& model = models_[index];
  bool all_failed = false;
  std::string state;
  {
    std::lock_guard lock(mutex_);
    bool routable = pick_replica(model, monotonic_ns(), all_failed) >= 0;
    if (!routable && !all_failed && !draining_ && !stopping_) return;
    state = model.replicas[0].state.state;
  }
  for (const auto& request : held_.take_all(index)) {
    if (request->client_gone()) {
      done(index);
    } else if (all_failed) {
      answer_failed(request, state);
    } else {
      route(request);  // may wait again, should the replica go meanwhile
    }
  }
}

bool Router::admit_key(const HttpRequest& request, HttpResponse& response) const {
  const std::string& path = request.head.path;
  if (keys_.empty() || path == "/health" || path == "/metrics" || path == "/ping") return true;
  return authorize(request, keys_, response) != nullptr;
}

const std::vector<size_t>* Router::models_of_key(const HttpRequest& request) const {
  return keys_.empty() ? nullptr : keys_.find(bearer_token(request.header("authorization")));
}

bool Router::admit_to_model(const HttpRequest& request, size_t index, HttpResponse& response) {
  Model& model = models_[index];
  if (const std::vector<size_t>* allowed = models_of_key(request);
      allowed && std::find(allowed->begin(), allowed->end(), index) == allowed->end()) {
    send_error(response, 403,
               "this API key may not call the model '" + model.config.name +
                   "'; GET /v1/models with it lists the models it may call",
               "permission_error", "model", "model_not_allowed");
    return false;
  }
  AdmissionLimit::Decision decision = model.limit->admit(monotonic_ns());
  if (decision.verdict == AdmissionLimit::Verdict::kAdmitted) return true;
  std::string retry = "Retry-After: " + std::to_string(decision.retry_after_s);
  if (decision.verdict == AdmissionLimit::Verdict::kTooManyInFlight) {
    model.counters.rejected_in_flight++;
    send_error(response, 429,
               "the model '" + model.config.name + "' has " +
                   std::to_string(model.limit->max_in_flight()) +
                   " requests in flight, its max_requests_in_flight; retry shortly",
               "rate_limit_exceeded", nullptr, "too_many_requests_in_flight", {retry});
  } else {
    model.counters.rejected_rate++;
    char rate[32];
    std::snprintf(rate, sizeof rate, "%g", model.limit->requests_per_second());
    send_error(response, 429,
               "the model '" + model.config.name + "' takes at most " + rate +
                   " requests per second (its requests_per_second); retry after " +
                   std::to_string(decision.retry_after_s) + " s",
               "rate_limit_exceeded", nullptr, "rate_limit_exceeded", {retry});
  }
  return false;
}

void Router::handle_models(const HttpRequest& request, std::shared_ptr<HttpResponse> response) {
  const std::vector<size_t>* allowed = models_of_key(request);
  Json data = Json::array();
  {
    std::lock_guard lock(mutex_);
    for (size_t index = 0; index < models_.size(); ++index) {
      if (allowed && std::find(allowed->begin(), allowed->end(), index) == allowed->end()) continue;
      const Model& m = models_[index];
      int ready = 0;
      for (const Replica& r : m.replicas) ready += r.state.ready ? 1 : 0;
      data.push_back({{"id", m.config.name},
                      {"object", "model"},
                      {"created", 0},
                      {"owned_by", "gpufrac"},
                      {"ready", ready > 0},
                      {"replicas", m.replicas.size()},
                      {"ready_replicas", ready}});
    }
  }
  response->send(200, "application/json", Json{{"object", "list"}, {"data", data}}.dump());
}

void Router::handle_health(std::shared_ptr<HttpResponse> response) {
  Json not_ready = Json::array();
  {
    std::lock_guard lock(mutex_);
    for (const Model& m : models_) {
      bool any = false;
      for (const Replica& r : m.replicas) any |= r.state.ready;
      if (!any) not_ready.push_back(m.config.name);
    }
  }
  bool ok = not_ready.empty() && !draining_;
  response->send(
      ok ? 200 : 503, "application/json",
      Json{{"status", ok ? "ok" : (draining_ ? "draining" : "starting")}, {"not_ready", not_ready}}
          .dump());
}

void Router::handle_metrics(std::shared_ptr<HttpResponse> response) {
  std::vector<ModelMetricsRow> rows;
  std::vector<std::pair<std::string, std::string>> engines;  // replica label, /metrics URL
  {
    std::lock_guard lock(mutex_);
    for (size_t m = 0; m < models_.size(); ++m) {
      ModelMetricsRow row{models_[m].config.name, &models_[m].counters,         0, 0,
                          held_.waiting(m),       models_[m].limit->in_flight()};
      for (size_t i = 0; i < models_[m].replicas.size(); ++i) {
        const Replica& r = models_[m].replicas[i];
        row.restarts += r.state.restarts;
        row.ready_replicas += r.state.ready ? 1 : 0;
        if (r.state.ready) {
          engines.emplace_back(models_[m].config.name + "/" + std::to_string(i),
                               "http://" + r.upstream.authority() + "/metrics");
        }
      }
      rows.push_back(std::move(row));
    }
  }
  std::string own = render_router_metrics(rows);
  // The engines are asked off the loop thread (a handler must not block); the thread holds
  // copies and the response only, so it may outlive the router.
  std::thread([own = std::move(own), engines = std::move(engines), response] {
    std::vector<EngineExposition> expositions;
    for (const auto& [replica, url] : engines) {
      HttpReply reply = http_get(url, kEngineMetricsTimeoutS);
      if (reply.ok()) expositions.push_back({replica, std::move(reply.body)});
    }
    response->send(200, "text/plain; version=0.0.4", own + merge_engine_expositions(expositions));
  }).detach();
}

}  // namespace gpufrac
