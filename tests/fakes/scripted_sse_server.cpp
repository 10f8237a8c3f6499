#include "fakes/scripted_sse_server.h"

#include <sys/prctl.h>

#include <chrono>
#include <fstream>

#include "common/clock.h"
#include "common/error.h"
#include "common/json.h"
#include "common/strings.h"

namespace gpufrac {

struct ScriptedSseServer::Stream {
  std::shared_ptr<HttpResponse> response;
  std::string id;
  std::string model_json;
  bool chat = false;
  bool include_usage = false;
  int64_t prompt_tokens = 0;
  int total_tokens = 0;
  int limit = 0;  // tokens sent before the failure (== total_tokens without one)
  const ScriptedFailureRule* failure = nullptr;
  int sent = 0;
  int64_t first_chunk_ns = 0;
  int64_t chunk = 0;
  bool started = false;                  // response head sent
  const char* finish_pending = nullptr;  // finish_chunk: the reason still to send
  // Tracing (options.trace_path).
  std::string request_id;
  int64_t arrived_ns = 0;
  std::vector<std::pair<int64_t, int64_t>> chunks;  // due, handed to the HTTP server
};

namespace {

std::string sse(const std::string& json) {
  return "data: " + json + "\n\n";
}

std::string chunk_json(const std::string& id, const std::string& model_json, bool chat,
                       const std::string& text, const char* finish_reason) {
  std::string reason = finish_reason ? std::string("\"") + finish_reason + "\"" : "null";
  std::string text_json = Json(text).dump();
  if (chat) {
    return "{\"id\":\"" + id +
           "\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":" + model_json +
           ",\"choices\":[{\"index\":0,\"delta\":{\"content\":" + text_json +
           "},\"logprobs\":null,\"finish_reason\":" + reason + "}]}";
  }
  return "{\"id\":\"" + id +
         "\",\"object\":\"text_completion\",\"created\":0,\"model\":" + model_json +
         ",\"choices\":[{\"index\":0,\"text\":" + text_json +
         ",\"logprobs\":null,\"finish_reason\":" + reason + "}]}";
}

std::string usage_json(const std::string& id, const std::string& model_json, bool chat,
                       int64_t prompt, int64_t completion) {
  return "{\"id\":\"" + id + "\",\"object\":\"" +
         (chat ? "chat.completion.chunk" : "text_completion") +
         "\",\"created\":0,\"model\":" + model_json +
         ",\"choices\":[],\"usage\":{\"prompt_tokens\":" + std::to_string(prompt) +
         ",\"completion_tokens\":" + std::to_string(completion) +
         ",\"total_tokens\":" + std::to_string(prompt + completion) + "}}";
}

// A chat request's finish_reason in a chunk of its own: an empty delta (vLLM's servers may send
// one; it is not content).
std::string finish_json(const std::string& id, const std::string& model_json, bool chat,
                        const char* finish_reason) {
  std::string choice = chat ? "{\"index\":0,\"delta\":{}," : "{\"index\":0,\"text\":\"\",";
  return "{\"id\":\"" + id + "\",\"object\":\"" +
         (chat ? "chat.completion.chunk" : "text_completion") +
         "\",\"created\":0,\"model\":" + model_json + ",\"choices\":[" + choice +
         "\"logprobs\":null,\"finish_reason\":\"" + finish_reason + "\"}]}";
}

std::vector<std::string> message_contents(const Json& body) {
  std::vector<std::string> contents;
  for (const Json& m : body.value("messages", Json::array())) {
    bool text = m.is_object() && m.contains("content") && m["content"].is_string();
    contents.push_back(text ? m["content"].get<std::string>() : std::string());
  }
  return contents;
}

}  // namespace

int64_t toy_text_tokens(const std::string& text) {
  int64_t tokens = 0, run = 0;
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\t') {
      tokens += (run + 3) / 4;
      run = 0;
    } else {
      ++run;
    }
  }
  return tokens + (run + 3) / 4;
}

int64_t toy_chat_tokens(const std::vector<std::string>& contents, bool add_generation_prompt) {
  int64_t tokens = add_generation_prompt ? 3 : 0;
  for (const std::string& content : contents) tokens += 5 + toy_text_tokens(content);
  return tokens;
}

ScriptedFailureRule parse_failure_rule(const std::string& text) {
  std::vector<std::string> parts = split(text, ',');
  ScriptedFailureRule rule;
  const std::string& kind = parts[0];
  if (kind == "http_error")
    rule.kind = ScriptedFailure::kHttpError;
  else if (kind == "error_event")
    rule.kind = ScriptedFailure::kErrorEvent;
  else if (kind == "drop")
    rule.kind = ScriptedFailure::kDrop;
  else if (kind == "stall")
    rule.kind = ScriptedFailure::kStall;
  else if (kind == "short")
    rule.kind = ScriptedFailure::kShort;
  else if (kind == "no_done")
    rule.kind = ScriptedFailure::kNoDone;
  else {
    throw UsageError("--fail: unknown kind '" + kind +
                     "' (http_error, error_event, drop, stall, short, no_done)");
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    size_t eq = parts[i].find('=');
    std::string key = parts[i].substr(0, eq);
    std::string value = eq == std::string::npos ? "" : parts[i].substr(eq + 1);
    int number = int(parse_int(value, "--fail " + key));
    if (key == "every")
      rule.every = number;
    else if (key == "offset")
      rule.offset = number;
    else if (key == "after")
      rule.after_tokens = number;
    else if (key == "status")
      rule.http_status = number;
    else
      throw UsageError("--fail: unknown field '" + key + "' (every, offset, after, status)");
  }
  if (rule.every < 1) throw UsageError("--fail every must be >= 1");
  return rule;
}

ScriptedSseServer::ScriptedSseServer(ScriptedSseOptions options)
    : options_(std::move(options)), http_(HttpServerOptions{options_.host, options_.port}) {
  http_.route("POST", "/v1/completions",
              [this](const HttpRequest& q, std::shared_ptr<HttpResponse> r) {
                handle(q, std::move(r), false);
              });
  http_.route("POST", "/v1/chat/completions",
              [this](const HttpRequest& q, std::shared_ptr<HttpResponse> r) {
                handle(q, std::move(r), true);
              });
  if (options_.tokenize) {
    http_.route("POST", "/tokenize", [this](const HttpRequest& q, std::shared_ptr<HttpResponse> r) {
      handle_tokenize(q, *r);
    });
  }
  http_.route("GET", "/v1/models", [this](const HttpRequest&, std::shared_ptr<HttpResponse> r) {
    Json data = Json::array();
    for (const std::string& m : options_.models) {
      data.push_back({{"id", m}, {"object", "model"}, {"created", 0}, {"owned_by", "scripted"}});
    }
    r->send(200, "application/json", Json{{"object", "list"}, {"data", data}}.dump());
  });
  http_.route("GET", "/health", [](const HttpRequest&, std::shared_ptr<HttpResponse> r) {
    r->send(200, "application/json", "{}");
  });
  // Two of vLLM's series, as gpufrac serve names them, for the router's relay.
  http_.route("GET", "/metrics", [this](const HttpRequest&, std::shared_ptr<HttpResponse> r) {
    const std::string labels = "{model_name=\"" + options_.models.front() + "\"}";
    const int64_t finished = finished_.load();
    r->send(200, "text/plain; version=0.0.4",
            "# HELP vllm:request_success_total Requests finished.\n"
            "# TYPE vllm:request_success_total counter\n"
            "vllm:request_success_total" + labels + " " + std::to_string(finished) + "\n"
            "# HELP vllm:num_requests_running Requests in the running batch.\n"
            "# TYPE vllm:num_requests_running gauge\n"
            "vllm:num_requests_running" + labels + " " +
                std::to_string(requests_.load() - finished) + "\n");
  });
}

ScriptedSseServer::~ScriptedSseServer() {
  stop();
}

std::string ScriptedSseServer::url() const {
  return "http://" + options_.host + ":" + std::to_string(port());
}

void ScriptedSseServer::start() {
  http_.start();
  scheduler_ = std::thread([this] { run_scheduler(); });
}

void ScriptedSseServer::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (scheduler_.joinable()) scheduler_.join();
  http_.stop();
  if (!options_.trace_path.empty()) write_trace();
  stalled_.clear();
  traced_.clear();
  while (!queue_.empty()) queue_.pop();
}

void ScriptedSseServer::write_trace() {
  std::ofstream out(options_.trace_path);
  for (const auto* streams : {&traced_, &stalled_}) {
    for (const auto& stream : *streams) {
      out << Json{{"request_id", stream->request_id},
                  {"arrived_ns", stream->arrived_ns},
                  {"chunks", stream->chunks}}
                 .dump()
          << "\n";
    }
  }
}

void ScriptedSseServer::handle_tokenize(const HttpRequest& request, HttpResponse& response) {
  ++tokenize_requests_;
  Json body = Json::parse(request.body, nullptr, false);
  if (!body.is_object()) {
    send_openai_error(response, 400, "request body is not a JSON object");
    return;
  }
  std::string model = body.value("model", "");
  bool known = false;
  for (const std::string& m : options_.models) known = known || m == model;
  if (!known) {
    send_openai_error(response, 404, "The model `" + model + "` does not exist.", "model");
    return;
  }
  int64_t count = 0;
  if (body.contains("messages")) {
    count = toy_chat_tokens(message_contents(body), body.value("add_generation_prompt", true));
  } else if (auto p = body.find("prompt"); p != body.end() && p->is_string()) {
    count = toy_text_tokens(p->get<std::string>()) + 1;
  } else {
    send_openai_error(response, 400, "give \"prompt\" (a string) or \"messages\"", "prompt");
    return;
  }
  std::vector<int64_t> tokens(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) tokens[size_t(i)] = i % 1000;
  response.send(200, "application/json",
                Json{{"count", count}, {"max_model_len", 32768}, {"tokens", tokens}}.dump());
}

void ScriptedSseServer::handle(const HttpRequest& request, std::shared_ptr<HttpResponse> response,
                               bool chat) {
  const int64_t arrived = monotonic_ns();
  const int64_t index = requests_.fetch_add(1);
  Json body = Json::parse(request.body, nullptr, false);
  if (!body.is_object()) {
    send_openai_error(*response, 400, "request body is not a JSON object");
    return;
  }
  std::string model = body.value("model", "");
  bool known = false;
  for (const std::string& m : options_.models) known = known || m == model;
  if (!known) {
    send_openai_error(*response, 404, "The model `" + model + "` does not exist.", "model");
    return;
  }
  if (!body.value("stream", false)) {
    send_openai_error(*response, 400, "the scripted server only streams: set \"stream\": true",
                      "stream");
    return;
  }
  auto stream = std::make_shared<Stream>();
  for (const ScriptedFailureRule& rule : options_.failures) {
    if (index % rule.every == rule.offset % rule.every) {
      stream->failure = &rule;
      break;
    }
  }
  if (stream->failure && stream->failure->kind == ScriptedFailure::kHttpError) {
    send_openai_error(*response, stream->failure->http_status, "scripted failure");
    return;
  }
  stream->response = std::move(response);
  stream->id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(index);
  stream->model_json = Json(model).dump();
  stream->chat = chat;
  if (auto o = body.find("stream_options"); o != body.end() && o->is_object()) {
    stream->include_usage = options_.usage && o->value("include_usage", false);
  }
  if (chat) {
    stream->prompt_tokens = toy_chat_tokens(message_contents(body), true);
  } else if (auto p = body.find("prompt"); p != body.end()) {
    stream->prompt_tokens = p->is_array()    ? int64_t(p->size())
                            : p->is_string() ? toy_text_tokens(p->get<std::string>()) + 1
                                             : 0;
  }
  int asked = body.value("max_tokens", body.value("max_completion_tokens", 16));
  stream->total_tokens = options_.output_tokens > 0 ? options_.output_tokens : std::max(1, asked);
  stream->limit = stream->total_tokens;
  if (stream->failure && stream->failure->kind != ScriptedFailure::kNoDone) {
    stream->limit = std::min(stream->failure->after_tokens, stream->total_tokens);
  }
  stream->first_chunk_ns = arrived + int64_t(options_.ttft_ms * 1e6);
  stream->arrived_ns = arrived;
  stream->request_id = std::string(request.header("x-request-id"));
  if (chat) {  // vLLM opens chat streams with a role-only chunk at once: not a content event
    stream->response->start_stream(200, "text/event-stream");
    stream->started = true;
    stream->response->write(
        sse("{\"id\":\"" + stream->id +
            "\",\"object\":\"chat.completion.chunk\",\"created\":0,"
            "\"model\":" +
            stream->model_json +
            ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
            "\"logprobs\":null,\"finish_reason\":null}]}"));
  }
  const int64_t first_chunk_ns = stream->first_chunk_ns;
  bool earliest = false;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    earliest = queue_.empty() || first_chunk_ns < queue_.top().at_ns;
    queue_.push({first_chunk_ns, std::move(stream)});
  }
  // Wake the scheduler only when its sleep must end sooner: under load most requests are due
  // after something already queued, and a wake-up per request would cost the loop its CPU.
  if (earliest) wake_.notify_one();
}

void ScriptedSseServer::run_scheduler() {
  ::prctl(PR_SET_TIMERSLACK, 1000UL);  // wake within ~1 us of the due time, not 50 us
  std::unique_lock lock(mutex_);
  std::vector<std::shared_ptr<Stream>> due;
  while (!stopping_) {
    if (queue_.empty()) {
      wake_.wait(lock);
      continue;
    }
    int64_t next = queue_.top().at_ns;
    if (next > monotonic_ns()) {
      wake_.wait_until(lock, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(next)));
      continue;
    }
    int64_t now = monotonic_ns();
    while (!queue_.empty() && queue_.top().at_ns <= now) {
      due.push_back(queue_.top().stream);
      queue_.pop();
    }
    lock.unlock();
    for (auto& stream : due) {
      Step next = step(*stream);
      if (next == Step::kOver) {
        if (!options_.trace_path.empty()) {
          lock.lock();
          traced_.push_back(std::move(stream));
          lock.unlock();
        }
        continue;
      }
      int64_t at = due_ns(*stream, stream->chunk);
      lock.lock();
      if (next == Step::kNext)
        queue_.push({at, std::move(stream)});
      else
        stalled_.push_back(std::move(stream));
      lock.unlock();
    }
    due.clear();
    lock.lock();
  }
}

int64_t ScriptedSseServer::due_ns(const Stream& s, int64_t chunk) const {
  return s.first_chunk_ns +
         int64_t(double(chunk) * options_.tokens_per_chunk * options_.itl_ms * 1e6);
}

ScriptedSseServer::Step ScriptedSseServer::step(Stream& s) {
  HttpResponse& out = *s.response;
  if (!s.started) {
    // Completions streams send their head with the first chunk: one write instead of two keeps
    // the server's cost per request low when a thousand requests arrive at once.
    out.start_stream(200, "text/event-stream");
    s.started = true;
  }
  if (options_.comments && !out.write(": keep-alive\n\n")) return Step::kOver;
  auto failure_is = [&s](ScriptedFailure kind) { return s.failure && s.failure->kind == kind; };
  int tokens = std::min(options_.tokens_per_chunk, s.limit - s.sent);
  if (tokens > 0) {
    std::string text;
    for (int i = 0; i < tokens; ++i) text += " t" + std::to_string((s.sent + i) % 10);
    s.sent += tokens;
    const char* reason = s.sent == s.total_tokens                                   ? "length"
                         : s.sent == s.limit && failure_is(ScriptedFailure::kShort) ? "stop"
                                                                                    : nullptr;
    std::string chunk =
        sse(chunk_json(s.id, s.model_json, s.chat, text, options_.finish_chunk ? nullptr : reason));
    if (!options_.trace_path.empty()) {
      s.chunks.emplace_back(due_ns(s, s.chunk), monotonic_ns());
    }
    if (!out.write(chunk)) return Step::kOver;
    ++s.chunk;
    if (s.sent < s.limit) return Step::kNext;
    if (reason && options_.finish_chunk) {  // one chunk interval later, with the ending
      s.finish_pending = reason;
      return Step::kNext;
    }
  }
  if (s.finish_pending) {
    if (!out.write(sse(finish_json(s.id, s.model_json, s.chat, s.finish_pending)))) {
      return Step::kOver;
    }
    s.finish_pending = nullptr;
  }
  if (!s.failure || failure_is(ScriptedFailure::kShort) || failure_is(ScriptedFailure::kNoDone)) {
    if (s.include_usage) {
      out.write(sse(usage_json(s.id, s.model_json, s.chat, s.prompt_tokens, s.sent)));
    }
    if (!failure_is(ScriptedFailure::kNoDone)) {
      out.write("data: [DONE]\n\n");
      ++finished_;
    }
    out.end();
    return Step::kOver;
  }
  if (failure_is(ScriptedFailure::kErrorEvent)) {
    out.write(
        sse(openai_error_body("scripted failure mid-stream", "internal_server_error", {}, "500")));
    out.write("data: [DONE]\n\n");
    out.end();
    return Step::kOver;
  }
  if (failure_is(ScriptedFailure::kDrop)) {
    out.abort();
    return Step::kOver;
  }
  return Step::kStall;
}

}  // namespace gpufrac
