#include "engine/api/openai_server.h"

#include <ctime>
#include <variant>

#include "common/json.h"
#include "engine/api/resume_request.h"
#include "engine/api/tokenize_request.h"

namespace gpufrac::engine {

namespace {

// Answers a /tokenize or /detokenize request.
void send_reply(HttpResponse& response, const std::variant<Json, RequestError>& reply) {
  if (const RequestError* error = std::get_if<RequestError>(&reply)) {
    send_openai_error(response, error->status, error->message, error->param);
    return;
  }
  response.send(200, "application/json",
                std::get<Json>(reply).dump(-1, ' ', false, Json::error_handler_t::replace));
}

}  // namespace

OpenAiServer::OpenAiServer(Engine& engine, OpenAiServerOptions options)
    : engine_(engine),
      options_(std::move(options)),
      limits_{options_.served_model_name, engine.model_config().vocab_size,
              engine.options().max_model_len, options_.tokenizer},
      http_(options_.http) {
  if (!options_.api_keys.empty() || !options_.metrics_keys.empty()) {
    http_.gate([this](const HttpRequest& request, HttpResponse& response) {
      const std::string& path = request.head.path;
      if (path == "/health") return true;
      const ApiKeyTable& keys = path == "/metrics" ? options_.metrics_keys : options_.api_keys;
      return keys.empty() || authorize(request, keys, response) != nullptr;
    });
  }
  http_.route("POST", "/v1/completions",
              [this](const HttpRequest& request, std::shared_ptr<HttpResponse> response) {
                handle_generation(request, std::move(response), GenerationEndpoint::kCompletions);
              });
  http_.route("POST", "/v1/chat/completions",
              [this](const HttpRequest& request, std::shared_ptr<HttpResponse> response) {
                handle_generation(request, std::move(response),
                                  GenerationEndpoint::kChatCompletions);
              });
  http_.route("POST", "/tokenize",
              [this](const HttpRequest& request, std::shared_ptr<HttpResponse> r) {
                send_reply(*r, tokenize_reply(request.body, limits_));
              });
  http_.route("POST", "/detokenize",
              [this](const HttpRequest& request, std::shared_ptr<HttpResponse> r) {
                send_reply(*r, detokenize_reply(request.body, limits_));
              });
  http_.route("GET", "/v1/models", [this](const HttpRequest&, std::shared_ptr<HttpResponse> r) {
    handle_models(std::move(r));
  });
  http_.route("GET", "/health", [](const HttpRequest&, std::shared_ptr<HttpResponse> response) {
    response->send(200, "application/json", R"({"status":"ok"})");
  });
  http_.route("GET", "/metrics", [this](const HttpRequest&, std::shared_ptr<HttpResponse> r) {
    r->send(200, "text/plain; version=0.0.4; charset=utf-8",
            engine_.metrics().render_prometheus(options_.served_model_name));
  });
}

OpenAiServer::~OpenAiServer() {
  stop();
}

void OpenAiServer::start() {
  http_.start();
}
void OpenAiServer::stop() {
  http_.stop();
}

void OpenAiServer::handle_generation(const HttpRequest& request,
                                     std::shared_ptr<HttpResponse> response,
                                     GenerationEndpoint endpoint) {
  const bool chat = endpoint == GenerationEndpoint::kChatCompletions;
  auto parsed = parse_generation_request(request.body, limits_, endpoint);
  if (const RequestError* error = std::get_if<RequestError>(&parsed)) {
    send_openai_error(*response, error->status, error->message, error->param);
    return;
  }
  GenerationRequest& generation = std::get<GenerationRequest>(parsed);
  uint64_t id = engine_.new_request_id(generation.engine.n);
  SinkSetup setup;
  setup.engine = &engine_;
  setup.request_id = id;
  setup.response = response;
  setup.endpoint = endpoint;
  const char* object = !chat               ? "text_completion"
                       : generation.stream ? "chat.completion.chunk"
                                           : "chat.completion";
  setup.head = {{"id", (chat ? "chatcmpl-" : "cmpl-") + std::to_string(id)},
                {"object", object},
                {"created", static_cast<int64_t>(std::time(nullptr))},
                {"model", options_.served_model_name}};
  setup.include_usage = generation.include_usage;
  setup.tokenizer = options_.tokenizer ? options_.tokenizer->get() : nullptr;
  setup.text.stop_strings = std::move(generation.stop_strings);
  setup.text.min_tokens = generation.engine.stop.min_tokens;
  setup.text.skip_special_tokens = generation.skip_special_tokens;
  setup.resumed_ids = generation.resume_token_ids;
  continue_after(generation.engine, generation.resume_token_ids);
  setup.logprobs = generation.engine.logprobs >= 0;
  setup.choices = generation.engine.n;
  setup.echo_text = std::move(generation.echo_text);
  std::shared_ptr<RequestSink> sink = generation.stream ? make_streaming_sink(std::move(setup))
                                                        : make_buffered_sink(std::move(setup));
  // Handlers and disconnect callbacks both run on the HTTP loop thread: no disconnect can slip
  // in between this registration and the submit below.
  Engine& engine = engine_;
  response->on_disconnect([&engine, id] { engine.cancel(id); });
  switch (engine_.submit(id, std::move(generation.engine), std::move(sink))) {
    case Engine::Admission::kAccepted:
      return;
    case Engine::Admission::kQueueFull:
      send_openai_error(*response, 429,
                        "too many requests are waiting (at most " +
                            std::to_string(engine_.options().max_waiting_requests) +
                            "): retry later");
      return;
    case Engine::Admission::kStopped:
      send_openai_error(*response, 503, "the engine is stopping");
      return;
  }
}

void OpenAiServer::handle_models(std::shared_ptr<HttpResponse> response) {
  Json model = {{"id", options_.served_model_name},
                {"object", "model"},
                {"created", static_cast<int64_t>(std::time(nullptr))},
                {"owned_by", "gpufrac"},
                {"root", engine_.model_config().name},
                {"max_model_len", engine_.options().max_model_len}};
  Json body = {{"object", "list"}, {"data", Json::array({model})}};
  response->send(200, "application/json", body.dump());
}

}  // namespace gpufrac::engine
