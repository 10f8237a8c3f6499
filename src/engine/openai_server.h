// OpenAiServer: the engine's HTTP front — OpenAI-compatible endpoints over an HttpServer.
//   POST /v1/completions   token-id prompts; streaming (SSE) or not; usage; errors as OpenAI bodies
//   POST /v1/chat/completions  400 until the tokenizer (chat template) lands
//   GET  /v1/models        the one served model
//   GET  /health           200 while the engine runs
//   GET  /metrics          Prometheus text (EngineMetrics)
// A client that disconnects before its response ends cancels its request, which frees its KV
// blocks. Stream chunks carry the sampled ids in "token_ids" and, until the tokenizer lands, the
// id as text (" 1234") in "text".
//
// The Engine is borrowed and must outlive the server. start()/stop() from one thread; handlers run
// on the HTTP loop thread, sinks on the engine thread.
#pragma once

#include <memory>
#include <string>

#include "common/http_server.h"
#include "engine/completion_request.h"
#include "engine/engine.h"

namespace gpufrac::engine {

struct OpenAiServerOptions {
  std::string served_model_name;
  HttpServerOptions http;
};

class OpenAiServer {
 public:
  OpenAiServer(Engine& engine, OpenAiServerOptions options);
  ~OpenAiServer();

  // Binds (throws RuntimeFailure naming the address when it can't) and serves.
  void start();
  void stop();
  int port() const { return http_.port(); }

 private:
  void handle_completion(const HttpRequest& request, std::shared_ptr<HttpResponse> response);
  void handle_models(std::shared_ptr<HttpResponse> response);

  Engine& engine_;
  OpenAiServerOptions options_;
  CompletionLimits limits_;
  HttpServer http_;
};

}  // namespace gpufrac::engine
