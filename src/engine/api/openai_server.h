// OpenAiServer: the engine's HTTP front — OpenAI-compatible endpoints over an HttpServer.
//   POST /v1/completions       prompt as text or token ids; streaming (SSE) or not; usage
//   POST /v1/chat/completions  messages through the model's chat template; streaming or not
//   POST /tokenize             text or messages -> ids with their count (vLLM's helper)
//   POST /detokenize           ids -> text (vLLM's helper)
//   GET  /v1/models            the one served model
//   GET  /health               200 while the engine runs
//   GET  /metrics              Prometheus text (EngineMetrics)
// Request layouts and rules: generation_request.h (completions and chat), tokenize_request.h;
// response layouts: openai_server_sinks.h. Errors are OpenAI-style bodies with their 4xx/5xx
// status. A client that disconnects before its response ends cancels its request, which frees its
// KV blocks.
// With API keys (serve's --api-key), every path but /health and /metrics needs
// "Authorization: Bearer KEY" (401 otherwise, before routing: unknown paths too); with metrics
// keys (--metrics-key), /metrics needs one of those. Keys are compared in constant time and never
// logged (common/api_key.h).
// Without a tokenizer (ServedTokenizer::unavailable) token-id prompts still work, the text in the
// responses is each id as " 1234", and the text endpoints answer 400 saying why and how to fix it.
//
// The Engine and the ServedTokenizer are borrowed and must outlive the server. start()/stop()
// from one thread; handlers run on the HTTP loop thread, sinks on the engine thread.
#pragma once

#include <memory>
#include <string>

#include "common/api_key.h"
#include "common/http_server.h"
#include "engine/api/generation_request.h"
#include "engine/api/openai_server_sinks.h"
#include "engine/api/served_tokenizer.h"
#include "engine/engine.h"

namespace gpufrac::engine {

struct OpenAiServerOptions {
  std::string served_model_name;
  HttpServerOptions http;
  const ServedTokenizer* tokenizer = nullptr;  // borrowed; null: no tokenizer
  ApiKeyTable api_keys;                        // empty: no key needed
  ApiKeyTable metrics_keys;                    // empty: /metrics is open
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
  void handle_generation(const HttpRequest& request, std::shared_ptr<HttpResponse> response,
                         GenerationEndpoint endpoint);
  void handle_models(std::shared_ptr<HttpResponse> response);

  Engine& engine_;
  OpenAiServerOptions options_;
  RequestLimits limits_;
  HttpServer http_;
};

}  // namespace gpufrac::engine
