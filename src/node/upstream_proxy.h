// The router's upstream side: sends a client's request to a model's engine and hands the engine's
// reply, as it is parsed, to the request's owner (ProxyReplyHandler), which decides what the
// client sees (routed_request.h). The engine is any resolved address (ServerAddress: IPv4, IPv6,
// a host name resolved beforehand; local engines are on 127.0.0.1). forward() connects and sends
// the request on the caller's thread (a loopback connect completes at once: no thread hop before
// the engine sees the request); then one epoll thread owns the upstream connection, common's
// HttpClientConnection (rest of the write, incremental HttpParser on the reply), and calls the
// handler: the head once parsed, then each batch of decoded body bytes as soon as it is read (so
// streamed tokens pass through one by one), then how the exchange ended (ProxyResult).
//
// cancel() (the client left) closes the upstream connection at once (engines cancel on
// disconnect); destroying the proxy ends every exchange the same way.
// Thread-safe: forward() and cancel() may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/http_parser.h"
#include "common/http_url.h"

namespace gpufrac {

struct ProxyRequest {
  ServerAddress upstream;  // the engine (its Host header is upstream.authority())
  std::string method = "POST";
  std::string target;  // "/v1/completions"
  std::string body;
  std::vector<std::string> headers;  // extra request header lines (no CRLF)
};

enum class ProxyOutcome {
  kCompleted,  // the engine's whole reply was read
  kRefused,    // the engine was not listening: nothing was sent
  kFailed,     // the request could not be sent, or the connection ended before the reply was
               // complete (an engine that died)
  kMalformed,  // the reply is not valid HTTP
  kCancelled,  // cancel(), a handler that stopped the relay, or the proxy going away
};

struct ProxyResult {
  ProxyOutcome outcome = ProxyOutcome::kCompleted;
  bool reply_started = false;  // some of the engine's reply had arrived
  std::string error;           // what went wrong, one line ("" when completed)
};

// The owner's side of one exchange. Calls come one at a time, on the proxy thread; on_end comes
// exactly once and last (on forward()'s caller's thread when the connect fails at once).
class ProxyReplyHandler {
 public:
  virtual ~ProxyReplyHandler() = default;
  virtual void on_reply_head(const HttpHead& head) = 0;
  // Decoded body bytes as they arrive; false ends the exchange (on_end: kCancelled).
  virtual bool on_reply_body(std::string_view bytes) = 0;
  virtual void on_end(const ProxyResult& result) = 0;
};

class UpstreamProxy {
 public:
  UpstreamProxy();   // starts the proxy thread
  ~UpstreamProxy();  // ends every exchange (kCancelled)
  UpstreamProxy(const UpstreamProxy&) = delete;
  UpstreamProxy& operator=(const UpstreamProxy&) = delete;

  // Sends `request`; returns the exchange's id for cancel() (0 when it ended at once).
  uint64_t forward(ProxyRequest request, std::shared_ptr<ProxyReplyHandler> handler);
  // Ends exchange `id` if it is still running (its handler gets kCancelled).
  void cancel(uint64_t id);
  size_t active() const { return active_.load(); }

 private:
  class Loop;
  std::unique_ptr<Loop> loop_;
  std::atomic<size_t> active_{0};
};

}  // namespace gpufrac
