// ScriptedSseServer: a fake OpenAI-compatible streaming server whose timing is a script, for
// testing and calibrating `gpufrac bench` (tests in-process; scripted_sse_server_main.cpp wraps it
// as a standalone executable for scripts).
//
// POST /v1/completions and /v1/chat/completions stream SSE: the first chunk leaves `ttft_ms` after
// the request arrived, chunk k (0-based) at arrival + ttft + k * tokens_per_chunk * itl_ms
// (absolute times, so delays never accumulate), each carrying `tokens_per_chunk` tokens (the last
// one fewer if needed). Output length is `output_tokens`, or the request's max_tokens when 0.
// Completions streams send their response head with the first chunk; chat streams send it at
// once, with a role-only chunk; with stream_options.include_usage a usage
// chunk follows the last token, then "data: [DONE]". The last token's chunk carries
// finish_reason "length" (with `finish_chunk`, a chunk of its own with no text carries it, one
// chunk interval later, followed at once by the usage chunk and [DONE]).
// GET /v1/models lists `models`; GET /health answers 200 (the readiness path of vLLM and
// `gpufrac serve`, so a node can run it as a built-in engine: tests/fakes/fake_gpufrac_serve);
// GET /metrics gives vllm:request_success_total (requests finished) and
// vllm:num_requests_running, labelled model_name = the first of `models`.
//
// Its tokenizer is a toy (toy_text_tokens): every run of non-space characters counts
// ceil(length / 4) tokens, spaces count nothing. A chat request adds 5 tokens per message
// (<|im_start|>, role, newline, <|im_end|>, newline) and 3 for the generation prompt; a
// completions prompt string adds 1 (a BOS). usage.prompt_tokens counts that way, and so does
// POST /tokenize (vLLM's form: {"model", "prompt"} or {"model", "messages",
// "add_generation_prompt"} -> {"count", "max_model_len", "tokens"}) unless `tokenize` is off,
// when it answers 404 like a server without it.
//
// Failures, chosen per request by arrival order (request i, counting from 0, matches a rule when
// i % every == offset; the first matching rule applies):
//   http_error   answer `http_status` with an OpenAI error body, no stream
//   error_event  after `after_tokens` tokens, an {"error": ...} event, then [DONE]
//   drop         after `after_tokens` tokens, close the connection (as a crashed server would)
//   stall        after `after_tokens` tokens, send nothing more (the client must time out)
//   short        finish normally after `after_tokens` tokens (usage says so): a short output
//   no_done      all tokens, then end the stream without [DONE]
//
// Thread-safety: configure before start(); counters may be read from any thread. One scheduler
// thread emits every stream's chunks at their due times (timer slack 1 us); the HTTP loop runs on
// HttpServer's thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include "common/http_server.h"

namespace gpufrac {

enum class ScriptedFailure { kHttpError, kErrorEvent, kDrop, kStall, kShort, kNoDone };

struct ScriptedFailureRule {
  ScriptedFailure kind = ScriptedFailure::kHttpError;
  int every = 1;
  int offset = 0;
  int after_tokens = 0;
  int http_status = 500;
};
// "KIND[,every=N][,offset=K][,after=T][,status=S]", e.g. "drop,every=10,after=3".
ScriptedFailureRule parse_failure_rule(const std::string& text);

// The toy tokenizer's counts (see above).
int64_t toy_text_tokens(const std::string& text);
int64_t toy_chat_tokens(const std::vector<std::string>& contents, bool add_generation_prompt);

struct ScriptedSseOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: ephemeral (read port())
  double ttft_ms = 50;
  double itl_ms = 10;
  int tokens_per_chunk = 1;
  int output_tokens = 0;      // 0: the request's max_tokens
  bool comments = false;      // a ": keep-alive" comment line before every chunk
  bool usage = true;          // send the usage chunk when the request asks for it
  bool tokenize = true;       // serve POST /tokenize
  bool finish_chunk = false;  // finish_reason in a chunk of its own, after the last token's
  // When set, stop() writes one JSON line per stream to this file: {"request_id" (the request's
  // X-Request-Id), "arrived_ns", "chunks": [[due_ns, handed_ns], ...]}, handed_ns being when the
  // chunk was handed to the HTTP server (CLOCK_MONOTONIC). For measuring a client's timestamps.
  std::string trace_path;
  std::vector<std::string> models = {"scripted"};
  std::vector<ScriptedFailureRule> failures;
};

class ScriptedSseServer {
 public:
  explicit ScriptedSseServer(ScriptedSseOptions options);
  ~ScriptedSseServer();
  void start();
  void stop();
  int port() const { return http_.port(); }
  std::string url() const;  // "http://127.0.0.1:PORT"

  int64_t requests_received() const { return requests_.load(); }
  int64_t streams_finished() const { return finished_.load(); }  // ended with [DONE]
  int64_t tokenize_requests() const { return tokenize_requests_.load(); }

 private:
  struct Stream;
  struct Due {
    int64_t at_ns;
    std::shared_ptr<Stream> stream;
    bool operator>(const Due& other) const { return at_ns > other.at_ns; }
  };
  void handle(const HttpRequest& request, std::shared_ptr<HttpResponse> response, bool chat);
  void handle_tokenize(const HttpRequest& request, HttpResponse& response);
  void run_scheduler();
  enum class Step { kNext, kOver, kStall };
  // Sends the stream's due chunk (and its ending, if this was the last one).
  Step step(Stream& stream);
  void write_trace();
  int64_t due_ns(const Stream& stream, int64_t chunk) const;  // chunk k's time (absolute)

  ScriptedSseOptions options_;
  HttpServer http_;
  std::atomic<int64_t> requests_{0};
  std::atomic<int64_t> finished_{0};
  std::atomic<int64_t> tokenize_requests_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> queue_;
  std::vector<std::shared_ptr<Stream>> stalled_;  // kept open until stop()
  std::vector<std::shared_ptr<Stream>> traced_;   // finished streams, with trace_path
  bool stopping_ = false;
  std::thread scheduler_;
};

}  // namespace gpufrac
