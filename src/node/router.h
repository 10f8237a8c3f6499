// The node's front door: one listen address for every model. POST /v1/completions,
// /v1/chat/completions, /tokenize and /detokenize (vLLM's helpers) go to a ready replica of the
// model named in the body's "model" (the one with the fewest requests in flight), as a
// RoutedRequest relayed by UpstreamProxy (streams pass through event by event; a client that
// disconnects closes the upstream request). GET /v1/models lists every model with its readiness;
// GET /health is 200 when every model has a ready replica, else 503; GET /ping is 200 while the
// router runs (a probe that needs no key); GET /metrics is the router's Prometheus text
// (router_metrics.h) followed by every ready replica's own /metrics, each sample labelled
// replica="<model>/<index>" (engine_metrics_relay.h; an engine that does not answer within 2 s
// is left out of that scrape).
//
// Nothing lost when an engine dies:
//   - Hold: a request for a model with no replica to serve it (starting, restarting) waits here,
//     in order (HeldRequests), and is sent as soon as a replica is ready; only after the model's
//     restart_wait, or beyond its queue_limit, is it answered 503 (Retry-After).
//   - Retry and resume: a request whose engine failed is sent again (RoutedRequest says when)
//     to a ready replica, waiting like a new one when there is none. A replica whose engine
//     failed is avoided until the supervisor reports it again (or kAvoidFailed_ns passed).
//   - A model whose replicas have all failed (the supervisor gave up on a crash loop) is answered
//     503 model_failed at once, its waiting requests too.
//
// Who may call what: a model's api_keys are the Bearer keys that may call it. Once any model has
// keys, every path but /health, /metrics and /ping needs one of them (401 without, or with a key
// that opens nothing: common/api_key.h); a key used on a model it is not listed for gets 403
// (model_not_allowed), and GET /v1/models lists only the models of the key sent. The client's
// Authorization header never reaches an engine then: the router sends its own engine key (the
// node's internal key, which the engines require) when it has one, else none. Without any
// model keys the client's header is passed on as it came.
// Limits: a model's max_requests_in_flight and requests_per_second (admission_limit.h) are
// checked when a request is accepted; over either: 429 (rate_limit_exceeded, or
// too_many_requests_in_flight) with Retry-After, and the model's other requests, and the other
// models, go on as before. Held requests count as in flight; retries are not admitted again.
//
// Errors, OpenAI-style: unknown model 404 (code model_not_found); no ready replica within the
// bounds 503 (model_not_ready, or queue_full; Retry-After: 1); a failed model 503 (model_failed);
// body not a JSON object or without a "model" string 400; node draining for shutdown 503
// (node_draining); an engine's malformed reply, or a failure that could not be mended, 502 or a
// cut stream. Only "model" is read (request_model.h): the engine validates the rest of the body.
//
// A replica's engine is reached at its host and port (ReplicaState; 127.0.0.1 for the node's own
// engines): an IPv4 or IPv6 literal or a host name, resolved by set_replica() when the replica
// becomes ready. A ready replica whose host does not resolve is kept not ready, its state naming
// the resolver's error (503 model_not_ready says it).
//
// If an engine serves under another name than the node's (a vLLM command without
// --served-model-name), the router rewrites "model" in the request to the engine's name, learnt
// from the engine's /v1/models when the replica became ready.
//
// Thread-safety: set_replica() may be called from any thread (the supervisor); request handling
// runs on the HTTP loop thread, the proxy thread and the hold timer thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/api_key.h"
#include "common/http_server.h"
#include "node/admission_limit.h"
#include "node/held_requests.h"
#include "node/routed_request.h"
#include "node/router_metrics.h"
#include "node/upstream_proxy.h"

namespace gpufrac {

// How long a replica whose engine just failed is passed over when the supervisor says nothing.
inline constexpr int64_t kAvoidFailed_ns = 1'000'000'000;

struct RouterModel {
  std::string name;
  int replicas = 1;
  // The engine is the built-in one: its /v1/completions streams carry token ids and it takes
  // resume_token_ids, so a cut stream is resumed. Other engines' requests are sent again only
  // while nothing of the reply has reached the client.
  bool resumable = false;
  double restart_wait_s = 30;  // how long a request may wait for a ready replica; 0: not at all
  size_t queue_limit = 256;    // requests that may wait at once; more get 503 at once
  std::vector<std::string> api_keys{};  // the keys that may call it (see above)
  int max_requests_in_flight = 0;       // 0: no limit
  double requests_per_second = 0;       // 0: no limit
};

struct ReplicaState {
  std::string host = "127.0.0.1";  // the engine's address: "127.0.0.1", "::1", "localhost", ...
  int port = 0;
  bool ready = false;
  bool failed = false;             // the supervisor gave up on it (it kept failing)
  std::string state = "starting";  // shown in 503 messages: starting, restarting, failed: why, ...
  std::string served_name;         // the engine's own model id; empty: the node's name
  int restarts = 0;
};

class Router : private RequestOwner {
 public:
  // `engine_key`: sent to the engines as "Authorization: Bearer <engine_key>" (the node's
  // internal key); empty: none.
  Router(HttpServerOptions options, std::vector<RouterModel> models, std::string engine_key = {});
  ~Router() override;

  // Binds and serves; throws RuntimeFailure naming the address when it cannot bind.
  void start();
  int port() const { return server_.port(); }

  // Resolves a ready replica's host (blocking while a name is looked up: call it off the HTTP
  // loop, as the supervisor does), then sends the model's waiting requests if it can.
  void set_replica(const std::string& model, int replica, ReplicaState state);

  // Refuse new requests (503) and answer the waiting ones, then wait until every request in
  // flight has finished.
  void begin_drain();
  bool wait_idle(double timeout_s) const;  // true when nothing is in flight anymore
  size_t in_flight() const { return in_flight_.load(); }
  void stop();

 private:
  struct Replica {
    ReplicaState state;
    ServerAddress upstream;  // state's host and port, resolved while ready
    int in_flight = 0;
    int64_t avoid_until_ns = 0;  // its engine failed a request: not chosen until then
  };
  struct Model {
    RouterModel config;
    std::vector<Replica> replicas;
    size_t next = 0;  // round-robin start among equally loaded replicas
    ModelCounters counters;
    std::unique_ptr<AdmissionLimit> limit;
  };
  // The completions, chat, /tokenize and /detokenize endpoints: proxied to a replica of the
  // body's "model" (required here, though a single engine's /tokenize takes it as optional).
  void handle_model_request(const HttpRequest& request, std::shared_ptr<HttpResponse> response);
  void handle_models(const HttpRequest& request, std::shared_ptr<HttpResponse> response);
  // Whether the request may go on: the key check of every path but the open ones (401).
  bool admit_key(const HttpRequest& request, HttpResponse& response) const;
  // The key's models (null: every model, no keys are configured); the request passed admit_key.
  const std::vector<size_t>* models_of_key(const HttpRequest& request) const;
  // 403 or 429 when `model` may not take the request now; true when it was admitted.
  bool admit_to_model(const HttpRequest& request, size_t model, HttpResponse& response);
  void handle_health(std::shared_ptr<HttpResponse> response);
  void handle_metrics(std::shared_ptr<HttpResponse> response);

  // Sends `request` to the model's best replica, or holds it, or answers why it cannot.
  void route(const std::shared_ptr<RoutedRequest>& request);
  void attempt_ended(const std::shared_ptr<RoutedRequest>& request, AttemptEnd end,
                     bool engine_failed) override;
  // Routes the model's waiting requests when a replica can take them (or answers them all when
  // the model has failed).
  void release_held(size_t model);
  void answer_failed(const std::shared_ptr<RoutedRequest>& request, const std::string& why);
  // A request accepted for `model` has ended.
  void done(size_t model) {
    models_[model].limit->release();
    in_flight_--;
  }
  // Under mutex_: the replica to send to (-1: none), and whether every replica has failed.
  int pick_replica(Model& model, int64_t now, bool& all_failed);
  std::string state_of(const Model& model, int64_t now) const;  // why it serves nobody (mutex_)

  std::mutex mutex_;  // guards models_' replica states and counts
  std::vector<Model> models_;
  ApiKeyTable keys_;        // owners: model indexes; empty: no key needed
  std::string engine_key_;  // sent to the engines; empty: none
  std::atomic<bool> draining_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> in_flight_{0};
  // Declared in this order so that they go in reverse: the server (and its callbacks) first,
  // then the proxy (whose last exchanges end as it goes), then the waiting requests.
  HeldRequests held_;
  UpstreamProxy proxy_;
  HttpServer server_;
};

}  // namespace gpufrac
