// Test clients for the engine's HTTP server: raw-socket exchanges that can send any bytes (for
// malformed HTTP), read a streamed reply as it comes, and hang up mid-stream (cancel tests);
// plus helpers to split an SSE body into its `data:` payloads and to read one /metrics value.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/http_client.h"
#include "common/http_parser.h"
#include "common/strings.h"

namespace gpufrac::testing {

struct RawReply {
  int status = 0;
  std::string content_type;
  std::string body;
  bool complete = false;  // a whole reply arrived
  std::string error;
};

inline std::string http_post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

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
inline RawReply http_exchange(int port, const std::string& request, double timeout_s = 20,
                              const std::string& hang_up_after = "", bool end_after_send = false) {
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
    parser.feed(std::string_view(buffer, size_t(n)), reply.body);
    if (parser.head_complete()) {
      reply.status = parser.head().status;
      reply.content_type = std::string(parser.head().header("content-type"));
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

// The payloads of an SSE body's "data: ..." events, in order.
inline std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> events;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    std::string event = body.substr(pos, end - pos);
    if (event.rfind("data: ", 0) == 0) events.push_back(event.substr(6));
    pos = end + 2;
  }
  return events;
}

// The value of the first sample line of `name` (exact name, then '{' or ' ') in Prometheus text;
// -1 when absent.
inline double metric_value(const std::string& text, const std::string& name) {
  for (const std::string& line : split(text, '\n')) {
    if (line.rfind(name, 0) != 0 || line.size() <= name.size()) continue;
    char next = line[name.size()];
    if (next != '{' && next != ' ') continue;
    return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

inline double scrape(int port, const std::string& name) {
  HttpReply r = http_get("http://127.0.0.1:" + std::to_string(port) + "/metrics");
  return r.ok() ? metric_value(r.body, name) : -1;
}

}  // namespace gpufrac::testing
