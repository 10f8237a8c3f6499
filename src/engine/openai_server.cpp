#include "engine/openai_server.h"

#include <charconv>
#include <ctime>
#include <string_view>
#include <variant>

#include "common/json.h"

namespace gpufrac::engine {

namespace {

void append_int(std::string& out, int64_t value) {
  char digits[24];
  auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  out.append(digits, end);
}

// The text of a sampled token, appended to `out`. Until the tokenizer lands, the id itself
// (" 1234"); with the tokenizer this becomes incremental detokenization (which must hold back
// split UTF-8 sequences).
void append_token_text(std::string& out, int32_t token) {
  out += ' ';
  append_int(out, token);
}

// `text` as a JSON string literal. Per token on the engine thread, so without a Json object.
void append_json_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  out += '"';
}

Json usage_json(const RequestOutcome& o) {
  return {{"prompt_tokens", o.prompt_tokens},
          {"completion_tokens", o.completion_tokens},
          {"total_tokens", o.prompt_tokens + o.completion_tokens}};
}

std::string_view finish_reason_json(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "\"stop\"";
    case FinishReason::kLength: return "\"length\"";
    default: return "null";  // only a request's last token carries a reason
  }
}

// Sends each token as an SSE chunk in OpenAI's text_completion format as it is sampled. The
// stream starts with the first event (on the engine thread), so a refused request can still get
// an error status from the handler.
class StreamingSink : public RequestSink {
 public:
  StreamingSink(Engine& engine, uint64_t id, std::shared_ptr<HttpResponse> response,
                std::string chunk_head, bool include_usage)
      : engine_(engine),
        id_(id),
        response_(std::move(response)),
        chunk_head_(std::move(chunk_head)),
        include_usage_(include_usage) {}

  void on_token(int32_t token, FinishReason finish) override {
    if (gone_) return;
    text_.clear();
    append_token_text(text_, token);
    chunk_ = chunk_head_;
    chunk_ += "\"choices\":[{\"index\":0,\"text\":";
    append_json_string(chunk_, text_);
    chunk_ += ",\"token_ids\":[";
    append_int(chunk_, token);
    chunk_ += "],\"logprobs\":null,\"finish_reason\":";
    chunk_ += finish_reason_json(finish);
    chunk_ += include_usage_ ? "}],\"usage\":null}\n\n" : "}]}\n\n";
    send(chunk_);
  }

  void on_finish(const RequestOutcome& outcome) override {
    if (!gone_ && outcome.reason == FinishReason::kError) {
      send("data: " + openai_error_body("generation failed: " + outcome.error,
                                        "internal_server_error", "", "500") + "\n\n");
    } else if (!gone_ && include_usage_ && outcome.reason != FinishReason::kCancelled) {
      send(chunk_head_ + "\"choices\":[],\"usage\":" + usage_json(outcome).dump() + "}\n\n");
    }
    if (!gone_) send("data: [DONE]\n\n");
    response_->end();
  }

 private:
  void send(std::string_view data) {
    if (!started_) {
      response_->start_stream(200, "text/event-stream");
      started_ = true;
    }
    if (!response_->write(data)) {
      gone_ = true;  // on_disconnect cancels too; this covers a write that lost the race
      engine_.cancel(id_);
    }
  }

  Engine& engine_;
  uint64_t id_;
  std::shared_ptr<HttpResponse> response_;
  std::string chunk_head_;  // `data: {"id":..,"object":..,"created":..,"model":..,`
  bool include_usage_;
  bool started_ = false;
  bool gone_ = false;
  std::string text_;   // reused for every token
  std::string chunk_;
};

// Collects the tokens and answers once with the whole completion.
class BufferedSink : public RequestSink {
 public:
  BufferedSink(std::shared_ptr<HttpResponse> response, Json head)
      : response_(std::move(response)), head_(std::move(head)) {}

  void on_token(int32_t token, FinishReason finish) override {
    tokens_.push_back(token);
    append_token_text(text_, token);
  }

  void on_finish(const RequestOutcome& outcome) override {
    if (outcome.reason == FinishReason::kError) {
      send_openai_error(*response_, 500, "generation failed: " + outcome.error);
      return;
    }
    if (outcome.reason == FinishReason::kCancelled) {  // the client left, or the server stops
      send_openai_error(*response_, 503, "the request was cancelled: the server is stopping");
      return;
    }
    Json body = head_;
    body["choices"] = Json::array({{{"index", 0},
                                    {"text", text_},
                                    {"token_ids", tokens_},
                                    {"logprobs", nullptr},
                                    {"finish_reason", finish_reason_name(outcome.reason)}}});
    body["usage"] = usage_json(outcome);
    response_->send(200, "application/json", body.dump());
  }

 private:
  std::shared_ptr<HttpResponse> response_;
  Json head_;
  std::vector<int32_t> tokens_;
  std::string text_;
};

}  // namespace

OpenAiServer::OpenAiServer(Engine& engine, OpenAiServerOptions options)
    : engine_(engine),
      options_(std::move(options)),
      limits_{options_.served_model_name, engine.model_config().vocab_size,
              engine.options().max_model_len},
      http_(options_.http) {
  http_.route("POST", "/v1/completions",
              [this](const HttpRequest& request, std::shared_ptr<HttpResponse> response) {
                handle_completion(request, std::move(response));
              });
  http_.route("POST", "/v1/chat/completions",
              [](const HttpRequest&, std::shared_ptr<HttpResponse> response) {
                send_openai_error(*response, 400,
                                  "chat completions need the tokenizer and chat template, which "
                                  "this engine does not have yet: use /v1/completions with a "
                                  "prompt of token ids");
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

OpenAiServer::~OpenAiServer() { stop(); }

void OpenAiServer::start() { http_.start(); }
void OpenAiServer::stop() { http_.stop(); }

void OpenAiServer::handle_completion(const HttpRequest& request,
                                     std::shared_ptr<HttpResponse> response) {
  auto parsed = parse_completion_request(request.body, limits_);
  if (const RequestError* error = std::get_if<RequestError>(&parsed)) {
    send_openai_error(*response, error->status, error->message, error->param);
    return;
  }
  CompletionRequest& completion = std::get<CompletionRequest>(parsed);
  uint64_t id = engine_.new_request_id();
  Json head = {{"id", "cmpl-" + std::to_string(id)},
               {"object", "text_completion"},
               {"created", static_cast<int64_t>(std::time(nullptr))},
               {"model", options_.served_model_name}};
  std::shared_ptr<RequestSink> sink;
  if (completion.stream) {
    std::string chunk_head = "data: " + head.dump();
    chunk_head.back() = ',';  // the object stays open for "choices"
    sink = std::make_shared<StreamingSink>(engine_, id, response, std::move(chunk_head),
                                           completion.include_usage);
  } else {
    sink = std::make_shared<BufferedSink>(response, std::move(head));
  }
  // Handlers and disconnect callbacks both run on the HTTP loop thread: no disconnect can slip
  // in between this registration and the submit below.
  Engine& engine = engine_;
  response->on_disconnect([&engine, id] { engine.cancel(id); });
  switch (engine_.submit(id, std::move(completion.engine), std::move(sink))) {
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
