// The node's front door: one listen address for every model. POST /v1/completions,
// /v1/chat/completions, /tokenize and /detokenize (vLLM's helpers) go to a ready replica of the
// model named in the body's "model" (the one with the fewest requests in flight), relayed by
// UpstreamProxy (streams pass through chunk by chunk; a client that disconnects closes the upstream
// request). GET /v1/models lists every model with its readiness; GET /health is 200 when every
// model has a ready replica, else 503.
//
// Errors, OpenAI-style: unknown model 404 (code model_not_found), model known but no replica
// ready 503 (code model_not_ready, Retry-After: 1), body not a JSON object or without a "model"
// string 400, node draining for shutdown 503. Only "model" is read (request_model.h): the engine
// validates the rest of the body.
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
// runs on the HTTP loop thread and the proxy thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/http_server.h"
#include "node/upstream_proxy.h"

namespace gpufrac {

struct RouterModel {
  std::string name;
  int replicas = 1;
};

struct ReplicaState {
  std::string host = "127.0.0.1";  // the engine's address: "127.0.0.1", "::1", "localhost", ...
  int port = 0;
  bool ready = false;
  std::string state = "starting";  // shown in 503 messages: starting, restarting, stopped, ...
  std::string served_name;         // the engine's own model id; empty: the node's name
};

class Router {
 public:
  Router(HttpServerOptions options, std::vector<RouterModel> models);
  ~Router();

  // Binds and serves; throws RuntimeFailure naming the address when it cannot bind.
  void start();
  int port() const { return server_.port(); }

  // Resolves a ready replica's host (blocking while a name is looked up: call it off the HTTP
  // loop, as the supervisor does).
  void set_replica(const std::string& model, int replica, ReplicaState state);

  // Refuse new requests (503), then wait until every request in flight has finished.
  void begin_drain() { draining_ = true; }
  bool wait_idle(double timeout_s) const;  // true when nothing is in flight anymore
  size_t in_flight() const { return in_flight_.load(); }
  void stop();

 private:
  struct Replica {
    ReplicaState state;
    ServerAddress upstream;  // state's host and port, resolved while ready
    int in_flight = 0;
  };
  struct Model {
    std::string name;
    std::vector<Replica> replicas;
    size_t next = 0;  // round-robin start among equally loaded replicas
  };
  // The completions, chat, /tokenize and /detokenize endpoints: proxied to a replica of the
  // body's "model" (required here, though a single engine's /tokenize takes it as optional).
  void handle_model_request(const HttpRequest& request, std::shared_ptr<HttpResponse> response);
  void handle_models(std::shared_ptr<HttpResponse> response);
  void handle_health(std::shared_ptr<HttpResponse> response);

  std::mutex mutex_;  // guards models_' replica states and counts
  std::vector<Model> models_;
  std::atomic<bool> draining_{false};
  std::atomic<size_t> in_flight_{0};
  UpstreamProxy proxy_;  // declared before server_: the server (and its callbacks) goes first
  HttpServer server_;
};

}  // namespace gpufrac
