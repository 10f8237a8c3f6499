// The router's upstream side: relays a client's request to a model's engine and the engine's
// answer back, as it arrives. The engine is any resolved address (ServerAddress: IPv4, IPv6, a
// host name resolved beforehand; local engines are on 127.0.0.1). forward() connects and sends
// the request on the caller's thread (a loopback connect completes at once: no thread hop before
// the engine sees the request); then one epoll thread owns the upstream connection, common's
// HttpClientConnection (rest of the write, incremental HttpParser on the reply). The client side
// is an HttpResponse handle, whose writes are thread-safe.
//
// Relaying: an upstream reply with Content-Length is sent on as one response (the non-streaming
// JSON case); any other (chunked, or until close: SSE streams) is started as a chunked stream at
// once and each batch of decoded body bytes is written to the client as soon as it is read, so
// tokens pass through one by one. If the client disconnects, the upstream connection is closed
// at once (engines cancel on disconnect). If the engine's reply is cut short, the client
// connection is aborted the same way (no false end of stream).
//
// Errors the proxy answers itself (OpenAI-style bodies): 503 when the engine refuses the
// connection (it is restarting), 502 when the request cannot be sent or the reply is malformed or
// cut short before any of it was relayed. Each relay reports how it ended (ProxyResult), including
// whether the client saw any of the engine's reply.
// Thread-safe: forward() may be called from any thread (see it for where on_done runs).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/http_server.h"
#include "common/http_url.h"

namespace gpufrac {

struct ProxyRequest {
  ServerAddress upstream;  // the engine (its Host header is upstream.authority())
  std::string method = "POST";
  std::string target;  // "/v1/completions"
  std::string body;
  std::vector<std::string> headers;  // extra request header lines (no CRLF)
  std::string model;                 // for error messages
};

enum class ProxyOutcome {
  kCompleted,   // the engine's whole reply reached the client
  kRefused,     // the engine was not listening (answered 503)
  kFailed,      // the request could not be sent, or the reply was malformed or cut short (answered
                // 502 if nothing had been relayed yet, else the client connection was aborted)
  kClientGone,  // the client disconnected first; the upstream connection was closed
};

struct ProxyResult {
  ProxyOutcome outcome = ProxyOutcome::kCompleted;
  // Some of the engine's reply reached the client (a stream's head, a whole reply): the client has
  // seen this attempt. False for kRefused and whenever the proxy answered with its own error.
  bool reply_relayed = false;
};

class UpstreamProxy {
 public:
  UpstreamProxy();   // starts the proxy thread
  ~UpstreamProxy();  // closes every upstream connection, aborting their clients
  UpstreamProxy(const UpstreamProxy&) = delete;
  UpstreamProxy& operator=(const UpstreamProxy&) = delete;

  // Relays `request`; `on_done` runs exactly once with the result (on the caller's thread when
  // the connect fails at once, else on the proxy thread).
  void forward(ProxyRequest request, std::shared_ptr<HttpResponse> response,
               std::function<void(const ProxyResult&)> on_done);
  size_t active() const { return active_.load(); }

 private:
  class Loop;
  std::unique_ptr<Loop> loop_;
  std::atomic<size_t> active_{0};
};

}  // namespace gpufrac
