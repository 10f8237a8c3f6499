// A small event-driven HTTP/1.1 server (one epoll loop thread) for gpufrac's servers: the engine's
// OpenAI API, the node's router, and the scripted fakes in tests.
//
// Handlers run on the loop thread and must not block: they either respond at once or keep the
// HttpResponse handle and answer later from any thread (a streaming engine pushes SSE chunks from
// its own thread). All HttpResponse methods are thread-safe; writes are queued to the loop thread.
// When the client disconnects before the response ends, the on_disconnect callback runs (on the
// loop thread) and further writes are dropped: that is how a server cancels abandoned requests.
//
// The server answers protocol errors itself with OpenAI-style JSON bodies: malformed requests
// (400), heads over 64 KiB (431), bodies over max_body_bytes (413), unknown paths (404), wrong
// methods (405), too many connections (503). Keep-alive and pipelined requests are supported
// (responses go out in order).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/http_parser.h"

namespace gpufrac {

struct HttpRequest {
  HttpHead head;
  std::string body;
  std::string_view header(std::string_view lower_name) const { return head.header(lower_name); }
};

class HttpConnectionState;  // internal, shared between the loop and response handles

class HttpResponse {
 public:
  // A complete response with Content-Length. `extra_headers` are full lines without CRLF.
  void send(int status, std::string_view content_type, std::string body,
            std::vector<std::string> extra_headers = {});
  // Starts a chunked response (e.g. "text/event-stream"); follow with write() and end().
  void start_stream(int status, std::string_view content_type,
                    std::vector<std::string> extra_headers = {});
  // Queues bytes of a started stream. Returns false once the client has gone (drop the work).
  bool write(std::string_view data);
  void end();
  // Closes the connection once the bytes queued so far are sent, leaving the response unfinished:
  // a server crash as the client sees it (the scripted fakes in tests use it).
  void abort();
  bool client_gone() const;
  // Runs once, on the loop thread, if the client disconnects before end()/send().
  void on_disconnect(std::function<void()> callback);

 private:
  friend class HttpServer;
  explicit HttpResponse(std::shared_ptr<HttpConnectionState> connection, uint64_t sequence);
  std::shared_ptr<HttpConnectionState> connection_;
  uint64_t sequence_;  // position of this response on its connection (pipelining order)
};

using HttpHandler = std::function<void(const HttpRequest&, std::shared_ptr<HttpResponse>)>;
// Sees every complete request before routing, on the loop thread: true lets it go to its route
// (or to the 404/405 answers); false means the gate answered it (an API key check: 401).
using HttpGate = std::function<bool(const HttpRequest&, HttpResponse&)>;

// An OpenAI-style error body: {"error": {"message", "type", "param", "code"}}.
std::string openai_error_body(std::string_view message, std::string_view type,
                              std::string_view param = {}, std::string_view code = {});
// Sends it with the status; type defaults from the status (400 invalid_request_error, ...).
void send_openai_error(HttpResponse& response, int status, std::string_view message,
                       std::string_view param = {});

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: an ephemeral port (read it back with port())
  uint64_t max_body_bytes = 16 << 20;
  int max_connections = 4096;
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();  // stops the loop and closes every connection
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Exact path match ("/v1/completions"), or a prefix when `path` ends with '*'. Call before start().
  void route(std::string method, std::string path, HttpHandler handler);
  // At most one gate (see HttpGate); call before start().
  void gate(HttpGate gate) { gate_ = std::move(gate); }

  // Binds and starts the loop thread. Throws RuntimeFailure naming the address when it can't bind.
  void start();
  void stop();
  int port() const { return port_; }
  size_t open_connections() const { return open_connections_.load(); }

 private:
  struct Route {
    std::string method;
    std::string path;
    HttpHandler handler;
  };
  class Loop;
  HttpServerOptions options_;
  std::vector<Route> routes_;
  HttpGate gate_;
  std::unique_ptr<Loop> loop_;
  int port_ = 0;
  std::atomic<size_t> open_connections_{0};
};

}  // namespace gpufrac
