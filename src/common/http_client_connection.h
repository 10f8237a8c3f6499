// One client-side HTTP/1.1 connection, non-blocking: the one connect / write / read / parse
// mechanism under every client of the project (bench's StreamClient, node's UpstreamProxy, the
// blocking http_request). It does the connect to a resolved address (IPv4 or IPv6; see
// http_url.h for names), writes a request (bytes the socket does not take at once wait for the
// next writable event), reads the reply into an incremental HttpParser, and says how the
// exchange ended. What to do about it (answer 502/503, record a status, retry, time out) is the
// owner's policy, in the owner's file.
//
// The owner drives the connection from its own event loop: watch() registers the socket in an
// EpollSet under the owner's key, and the connection keeps its interest up to date from then on.
// On a writable event (or an error/hang-up while connecting) call on_writable(); on a readable
// one, read_reply() until it says kWouldBlock (or split it: receive() then take(), for an owner
// that stamps every read before parsing any; end_of_input() when receive() says the input ended).
// A blocking owner calls wait_for_reply() instead, which drives the same steps with poll() until
// a deadline.
//
// Keep-alive: after kComplete, reusable() says whether another request may follow on the same
// connection; send_request() starts it (the parser is reset).
//
// Errors are errno values (0: none); nothing here throws or logs. The destructor closes the
// socket (and takes it out of its EpollSet, which must outlive the connection). Not thread-safe:
// one thread at a time drives a connection; it may change hands between calls when the owner
// synchronizes the hand-over (the proxy connects on the caller's thread, its loop thread takes
// over after a mutex-guarded hand-off).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/http_parser.h"
#include "common/http_url.h"

namespace gpufrac {

class EpollSet;

class HttpClientConnection {
 public:
  // What reading the reply came to.
  enum class ReplyStep {
    kWouldBlock,  // nothing to read now: wait for the next readable event
    kProgress,    // bytes were read and parsed (the head may now be complete); read again
    kComplete,    // the whole reply is parsed (its framing said so, or the close that ends it)
    kMalformed,   // the reply is not valid HTTP: parser().error_text() says why
    kClosed,      // the input ended before the reply was complete: error() is the errno
                  // (0: an orderly close); reply_started() tells whether any byte had come
  };
  // One read (receive()).
  struct Received {
    enum class Kind { kBytes, kNothing, kEnded } kind = Kind::kNothing;
    size_t bytes = 0;  // kBytes: how many were read into the buffer
    int error = 0;     // kEnded: the errno that ended the input (0: an orderly close)
  };

  HttpClientConnection() = default;
  ~HttpClientConnection();
  HttpClientConnection(const HttpClientConnection&) = delete;
  HttpClientConnection& operator=(const HttpClientConnection&) = delete;

  // Opens a non-blocking TCP socket (TCP_NODELAY) and starts connecting. Returns 0 (connected,
  // or still connecting()), or the errno of a socket or connect that failed at once (a refused
  // loopback connect does); then connect_failed().
  int connect(const SocketAddress& address);
  // Registers the socket with `epoll` under `key` (call once, after a successful connect()).
  void watch(EpollSet& epoll, uint64_t key);
  // EPOLLIN | EPOLLRDHUP, plus EPOLLOUT while connecting or while request bytes wait.
  uint32_t wanted_events() const;
  int fd() const { return fd_; }

  // Starts an exchange: queues `request` (every byte of it) and writes what the socket takes now
  // unless still connecting; resets the reply parser. `reply_has_no_body`: a request for which
  // the reply carries no body whatever its headers say (HEAD). Returns 0, or the errno of a write
  // that failed (the rest of the request is dropped; the failure shows again on reading).
  int send_request(std::string request, bool reply_has_no_body = false);
  // On a writable event: completes a pending connect (its error: connect_failed()), then writes
  // what waits. Returns 0 or the errno of the failed connect or write.
  int on_writable();

  // One read and its parse; decoded body bytes are appended to `body_out`.
  ReplyStep read_reply(std::string& body_out);
  // read_reply() in parts: one read into `buffer` (at most `capacity` bytes), ...
  Received receive(char* buffer, size_t capacity);
  // ... the parse of bytes read so, appending decoded body bytes to `body_out` (kProgress,
  // kComplete or kMalformed), ...
  ReplyStep take(std::string_view bytes, std::string& body_out);
  // ... and the end of the input that receive() reported (kComplete or kClosed).
  ReplyStep end_of_input(int error);
  // Connects, writes and reads as they become possible, waiting with poll(), until the reply is
  // complete (kComplete), malformed (kMalformed), the connect or the write failed or the input
  // ended early (kClosed: connect_failed(), send_failed(), error()), or `deadline_ns`
  // (CLOCK_MONOTONIC) passed (kWouldBlock: connecting() and sending() say how far it got).
  ReplyStep wait_for_reply(int64_t deadline_ns, std::string& body_out);

  bool connecting() const { return connecting_; }
  bool connect_failed() const { return connect_failed_; }
  bool send_failed() const { return send_failed_; }         // the last request could not be written
  bool sending() const { return sent_ < request_.size(); }  // request bytes wait to be written
  bool reply_started() const { return reply_started_; }     // a reply byte arrived (this request)
  // After kComplete: the server keeps the connection open for another request, and nothing
  // beyond the reply arrived.
  bool reusable() const;
  int error() const { return error_; }  // the errno of the last failure, 0 if none
  const HttpParser& parser() const { return parser_; }

 private:
  int flush();  // writes what waits; 0 or the write's errno
  void fail_connect(int error);
  void update_interest();

  int fd_ = -1;
  bool connecting_ = false;
  bool connect_failed_ = false;
  bool send_failed_ = false;
  std::string request_;
  size_t sent_ = 0;
  HttpParser parser_{HttpParser::Kind::kResponse};
  bool reply_started_ = false;
  bool bytes_after_reply_ = false;
  bool input_ended_ = false;
  int error_ = 0;
  EpollSet* epoll_ = nullptr;
  uint64_t key_ = 0;
  uint32_t watched_events_ = 0;
};

// "cannot connect to HOST:PORT: why" for the errno of a failed connect.
std::string connect_failure(const ServerAddress& server, int error);

// An HTTP/1.1 request that is its connection's only one: "METHOD target HTTP/1.1", Host (the
// server's authority), "Connection: close", each of `header_lines` (full lines without CRLF),
// Content-Length when there is a body or the method sends one (POST, PUT), then the body.
std::string format_http_request(std::string_view method, std::string_view target,
                                const ServerAddress& server,
                                const std::vector<std::string>& header_lines,
                                std::string_view body);

}  // namespace gpufrac
