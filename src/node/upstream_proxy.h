// The router's upstream side: relays a client's request to a model's engine and the engine's
// answer back, as it arrives. forward() connects to the engine and sends the request on the
// caller's thread (a loopback connect completes at once: no thread hop before the engine sees the
// request); then one epoll thread owns the upstream connection (rest of the write, incremental
// HttpParser on the reply). The client side is an HttpResponse handle, whose writes are
// thread-safe.
//
// Relaying: an upstream reply with Content-Length is sent on as one response (the non-streaming
// JSON case); any other (chunked, or until close: SSE streams) is started as a chunked stream at
// once and each batch of decoded body bytes is written to the client as soon as it is read, so
// tokens pass through one by one. If the client disconnects, the upstream connection is closed
// at once (engines cancel on disconnect). If the engine's reply is cut short, the client
// connection is aborted the same way (no false end of stream).
//
// Errors the proxy answers itself (OpenAI-style bodies): 503 when the engine refuses the
// connection (it is restarting), 502 when its reply is malformed or ends before its head.
// Thread-safe: forward() may be called from any thread; callbacks run on the proxy thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/http_server.h"

namespace gpufrac {

struct ProxyRequest {
  int port = 0;                      // the engine, on 127.0.0.1
  std::string method = "POST";
  std::string target;                // "/v1/completions"
  std::string body;
  std::vector<std::string> headers;  // extra request header lines (no CRLF)
  std::string model;                 // for error messages
};

enum class ProxyOutcome {
  kCompleted,   // the engine's whole reply reached the client
  kRefused,     // the engine was not listening (answered 503)
  kFailed,      // malformed or cut-short reply (answered 502, or the client connection aborted)
  kClientGone,  // the client disconnected first; the upstream connection was closed
};

class UpstreamProxy {
 public:
  UpstreamProxy();   // starts the proxy thread
  ~UpstreamProxy();  // closes every upstream connection, aborting their clients
  UpstreamProxy(const UpstreamProxy&) = delete;
  UpstreamProxy& operator=(const UpstreamProxy&) = delete;

  // Relays `request`; `on_done` runs exactly once with the outcome.
  void forward(ProxyRequest request, std::shared_ptr<HttpResponse> response,
               std::function<void(ProxyOutcome)> on_done);
  size_t active() const { return active_.load(); }

 private:
  class Loop;
  std::unique_ptr<Loop> loop_;
  std::atomic<size_t> active_{0};
};

}  // namespace gpufrac
