// bench's HTTP client: many concurrent streaming requests on one thread, driven by epoll.
//
// The caller (the load driver) calls start() to send a request and poll() to let the client wait
// for and handle network events; poll() hands back the records of requests that ended. Every
// request ends exactly once, with a status: ok, http_error (non-2xx reply), stream_error (an error
// event, malformed or incomplete stream), timeout (no complete response within the request
// timeout, counted from start()), or connection_error (refused, reset, closed mid-stream).
//
// Timing: each epoll wake-up first reads every ready socket and stamps each read with
// CLOCK_MONOTONIC as it returns, and only then parses; every SSE message carries the stamp of the
// read that delivered its first byte (sse_parser.h). Each connection is common's
// HttpClientConnection (connect, partial writes, HttpParser on the reply: chunked or not), driven
// in its two halves: receive() for every ready socket first, take() afterwards.
//
// Each request carries "X-Request-Id: <target>-<request_id>" for matching with server logs, and
// the target's API key, if it has one, as "Authorization: Bearer KEY".
//
// Connections: HTTP/1.1 keep-alive, one request at a time per connection, a new connection
// whenever no idle one to that target exists: no pool cap, so concurrency is never limited here.
// A request whose reused connection turns out to be closed before any reply byte arrives is resent
// once on a fresh connection (the server never saw it).
//
// Not thread-safe: one thread owns a client. Raise RLIMIT_NOFILE (raise_open_file_limit) before
// driving thousands of streams.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench/request_record.h"
#include "common/epoll_set.h"
#include "common/http_url.h"

namespace gpufrac {

struct StreamRequest {
  int target = 0;  // index into the endpoints given to the client
  std::string model;
  int64_t request_id = 0;
  bool warmup = false;
  std::string body;  // JSON
  int64_t input_tokens = 0;
  int64_t requested_output_tokens = 0;
  int64_t scheduled_ns = 0;
};

class StreamClient {
 public:
  // endpoints[target] = where that target's requests go (host, port, path).
  // api_keys[i]: endpoint i's key ("" or missing: none).
  StreamClient(std::vector<HttpUrl> endpoints, double request_timeout_s,
               const std::vector<std::string>& api_keys = {});
  ~StreamClient();  // closes every connection; requests still in flight are abandoned unrecorded
  StreamClient(const StreamClient&) = delete;
  StreamClient& operator=(const StreamClient&) = delete;

  void start(StreamRequest request);
  // Waits for network events until `wake_at_ns` at the latest (sooner when something happens),
  // handles them, expires timeouts, and appends the records of requests that ended to `finished`.
  void poll(int64_t wake_at_ns, std::vector<RequestRecord>& finished);

  size_t in_flight() const { return active_; }
  size_t open_connections() const { return connections_.size(); }

 private:
  struct Connection;
  struct Exchange;
  struct Arrival {
    uint64_t connection;
    size_t offset, size;
    int64_t ns;
  };

  // A new connection to that target, or null with the connect's errno in `error`.
  Connection* open_connection(int target, int& error);
  void attach(Connection& c, std::unique_ptr<Exchange> exchange);
  void on_writable(Connection& c);
  void note_sent(Connection& c);  // stamps sent_ns once the whole request is written
  void on_bytes(Connection& c, std::string_view bytes, int64_t ns, std::vector<RequestRecord>& out);
  void on_closed(Connection& c, int error, int64_t ns, std::vector<RequestRecord>& out);
  void on_message_complete(Connection& c, int64_t ns, bool reusable,
                           std::vector<RequestRecord>& out);
  // Ends the exchange: its record goes to `out`. The connection (if any) is left to the caller.
  void finish(std::unique_ptr<Exchange> exchange, RequestStatus status, std::string error,
              int64_t end_ns, std::vector<RequestRecord>& out);
  std::string connect_error(int target, int error) const;
  void expire_timeouts(int64_t now, std::vector<RequestRecord>& out);
  void close_connection(Connection& c);
  void make_idle(Connection& c);
  void wait(int64_t until_ns);

  struct Endpoint;
  std::vector<Endpoint> endpoints_;
  int64_t timeout_ns_;
  EpollSet epoll_;  // before connections_: they leave it as they close
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> connections_;
  std::vector<std::vector<uint64_t>> idle_;  // per target, most recently used last
  size_t active_ = 0;
  int64_t next_deadline_ns_ = INT64_MAX;
  std::vector<epoll_event> events_;
  int ready_ = 0;
  std::string arena_;  // one wake-up's reads
  std::vector<Arrival> arrivals_;
  std::vector<RequestRecord> failed_at_start_;  // start() could not even open a socket
};

// "HTTP <status>: <message>" from an error reply: the message of an OpenAI-style or vLLM error
// body, else the body itself (shortened).
std::string error_from_body(int status, const std::string& body);

// Raises the soft RLIMIT_NOFILE to the hard limit; returns the new soft limit.
uint64_t raise_open_file_limit();

}  // namespace gpufrac
