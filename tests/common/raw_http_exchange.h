// A raw-socket HTTP/1.1 test client for the project's servers (the engine's, the router's):
// sends any bytes (malformed requests too), reads the reply as it streams in (recording when body
// bytes arrived) and can hang up mid-stream (cancel-on-disconnect tests). Blocking; one
// connection per exchange, to 127.0.0.1. Also: a local port nothing listens on (free_port), for
// servers a test starts and for connections that must be refused, and whether [::1] can be used.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/http_parser.h"

namespace gpufrac::testing {

struct RawReply {
  int status = 0;
  std::string content_type;
  HttpHead head;  // the whole head (other headers), once it arrived
  std::string body;
  bool complete = false;            // a whole reply arrived
  std::vector<int64_t> arrival_ns;  // one entry per read that delivered body bytes
  std::string error;
};

inline std::string http_post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A loopback TCP port that nothing listens on at the moment of the call (the kernel's pick for
// a socket bound to port 0, closed again).
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// Whether a socket can be bound to the IPv6 loopback [::1] here (some containers have no IPv6):
// tests of IPv6 upstreams skip, saying so, where it cannot.
inline bool ipv6_loopback_available() {
  int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_loopback;
  bool bound = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  if (fd >= 0) ::close(fd);
  return bound;
}

// A blocking TCP connection to 127.0.0.1:`port`; -1 when refused.
inline int connect_local(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` on a new connection and reads one reply. With `hang_up_after`, closes the
// connection as soon as the body holds that substring (a client leaving mid-stream). With
// `end_after_send`, shuts down the sending side (the server sees EOF after the request).
// `on_body` sees the body so far after every read that added to it (a test acting mid-stream).
inline RawReply http_exchange(int port, const std::string& request, double timeout_s = 20,
                              const std::string& hang_up_after = "", bool end_after_send = false,
                              const std::function<void(const std::string&)>& on_body = {}) {
  RawReply reply;
  int fd = connect_local(port);
  if (fd < 0) {
    reply.error = "connect failed";
    return reply;
  }
  size_t sent = 0;
  while (sent < request.size()) {
    ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer (413) and close before reading everything
    sent += size_t(n);
  }
  if (end_after_send) ::shutdown(fd, SHUT_WR);
  HttpParser parser(HttpParser::Kind::kResponse);
  int64_t deadline = monotonic_ns() + int64_t(timeout_s * 1e9);
  char buffer[65536];
  for (;;) {
    int64_t left_ms = (deadline - monotonic_ns()) / 1'000'000;
    pollfd p{fd, POLLIN, 0};
    if (left_ms <= 0 || ::poll(&p, 1, int(left_ms)) <= 0) {
      reply.error = "timed out";
      break;
    }
    ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) {
      reply.complete = parser.state() == HttpParser::State::kDone || parser.finish_on_eof();
      if (!reply.complete) reply.error = "connection closed mid-reply";
      break;
    }
    const size_t before = reply.body.size();
    parser.feed(std::string_view(buffer, size_t(n)), reply.body);
    if (reply.body.size() > before) {
      reply.arrival_ns.push_back(monotonic_ns());
      if (on_body) on_body(reply.body);
    }
    if (parser.head_complete()) {
      reply.status = parser.head().status;
      reply.content_type = std::string(parser.head().header("content-type"));
      reply.head = parser.head();
    }
    if (parser.state() == HttpParser::State::kError) {
      reply.error = "malformed reply";
      break;
    }
    if (parser.state() == HttpParser::State::kDone) {
      reply.complete = true;
      break;
    }
    if (!hang_up_after.empty() && reply.body.find(hang_up_after) != std::string::npos) break;
  }
  ::close(fd);
  return reply;
}

// POSTs `body` (JSON) to `path` on a new connection and reads the reply as it streams in;
// `hang_up_after` as in http_exchange.
inline RawReply stream_request(int port, const std::string& path, const std::string& body,
                               double timeout_s = 20, const std::string& hang_up_after = "") {
  return http_exchange(port, http_post(path, body), timeout_s, hang_up_after);
}

}  // namespace gpufrac::testing
