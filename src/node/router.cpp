#include "node/router.h"

#include <thread>

#include "common/clock.h"
#include "common/json.h"
#include "common/log.h"
#include "node/request_model.h"

namespace gpufrac {
namespace {

void send_error(HttpResponse& response, int status, const std::string& message, const char* type,
                const char* param, const char* code, std::vector<std::string> headers = {}) {
  response.send(status, "application/json",
                openai_error_body(message, type, param ? param : "", code), std::move(headers));
}

}  // namespace

Router::Router(HttpServerOptions options, std::vector<RouterModel> models) : server_(options) {
  for (const RouterModel& m : models) {
    Model model;
    model.name = m.name;
    model.replicas.resize(size_t(std::max(1, m.replicas)));
    models_.push_back(std::move(model));
  }
  for (const char* path : {"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"}) {
    server_.route("POST", path,
                  [this](const HttpRequest& request, std::shared_ptr<HttpResponse> response) {
                    handle_model_request(request, std::move(response));
                  });
  }
  server_.route("GET", "/v1/models",
                [this](const HttpRequest&, std::shared_ptr<HttpResponse> response) {
                  handle_models(std::move(response));
                });
  server_.route("GET", "/health",
                [this](const HttpRequest&, std::shared_ptr<HttpResponse> response) {
                  handle_health(std::move(response));
                });
}

Router::~Router() {
  stop();
}

void Router::start() {
  server_.start();
}

void Router::stop() {
  server_.stop();
}

void Router::set_replica(const std::string& model, int replica, ReplicaState state) {
  ServerAddress upstream;
  std::string error;
  if (state.ready && !resolve_server_address(state.host, state.port, upstream, error)) {
    log_warn("router: model ", model, " replica ", replica, ": ", error);
    state.ready = false;
    state.state = error;
  }
  std::lock_guard lock(mutex_);
  for (Model& m : models_) {
    if (m.name != model || replica < 0 || size_t(replica) >= m.replicas.size()) continue;
    m.replicas[size_t(replica)].state = std::move(state);
    m.replicas[size_t(replica)].upstream = std::move(upstream);
  }
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
  if (draining_) {
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
  const std::string& name = requested->name;

  ProxyRequest forwarded;
  Model* model = nullptr;
  size_t chosen = 0;
  {
    std::lock_guard lock(mutex_);
    for (Model& m : models_) {
      if (m.name == name) model = &m;
    }
    if (!model) {
      send_error(*response, 404,
                 "the model '" + name + "' does not exist on this node; GET /v1/models lists them",
                 "invalid_request_error", "model", "model_not_found");
      return;
    }
    // The ready replica with the fewest requests in flight, starting after the last one chosen.
    int best = -1;
    size_t count = model->replicas.size();
    for (size_t k = 0; k < count; ++k) {
      size_t i = (model->next + k) % count;
      const Replica& r = model->replicas[i];
      if (!r.state.ready) continue;
      if (best < 0 || r.in_flight < model->replicas[size_t(best)].in_flight) best = int(i);
    }
    if (best < 0) {
      std::string state = model->replicas[0].state.state;
      send_error(*response, 503,
                 "the model '" + name + "' is not ready (" + state + "); retry shortly",
                 "service_unavailable", "model", "model_not_ready", {"Retry-After: 1"});
      return;
    }
    chosen = size_t(best);
    model->next = (chosen + 1) % count;
    Replica& replica = model->replicas[chosen];
    replica.in_flight++;
    forwarded.upstream = replica.upstream;
    if (!replica.state.served_name.empty() && replica.state.served_name != name) {
      forwarded.body = replace_request_model(request.body, *requested, replica.state.served_name);
    }
  }
  in_flight_++;
  forwarded.target = request.head.target;
  if (forwarded.body.empty()) forwarded.body = request.body;
  forwarded.model = name;
  forwarded.headers.push_back("Content-Type: application/json");
  for (const char* header : {"authorization", "accept"}) {
    std::string_view value = request.header(header);
    if (value.empty()) continue;
    forwarded.headers.push_back(
        std::string(header == std::string("accept") ? "Accept" : "Authorization") + ": " +
        std::string(value));
  }
  proxy_.forward(std::move(forwarded), std::move(response),
                 [this, model, chosen](const ProxyResult&) {
                   {
                     std::lock_guard lock(mutex_);
                     model->replicas[chosen].in_flight--;
                   }
                   in_flight_--;
                 });
}

void Router::handle_models(std::shared_ptr<HttpResponse> response) {
  Json data = Json::array();
  {
    std::lock_guard lock(mutex_);
    for (const Model& m : models_) {
      int ready = 0;
      for (const Replica& r : m.replicas) ready += r.state.ready ? 1 : 0;
      data.push_back({{"id", m.name},
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
      if (!any) not_ready.push_back(m.name);
    }
  }
  bool ok = not_ready.empty() && !draining_;
  response->send(
      ok ? 200 : 503, "application/json",
      Json{{"status", ok ? "ok" : (draining_ ? "draining" : "starting")}, {"not_ready", not_ready}}
          .dump());
}

}  // namespace gpufrac
