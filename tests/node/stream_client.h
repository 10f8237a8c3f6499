// A blocking HTTP client for node tests that sees a streamed reply as it arrives: it records when
// each batch of body bytes came in and can hang up early (to test cancel on disconnect).
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
#include "common/http_parser.h"

namespace gpufrac::testing {

struct StreamResult {
  int status = 0;
  std::string content_type;
  std::string body;
  bool complete = false;               // the reply ended properly (not cut, not timed out)
  std::vector<int64_t> arrival_ns;     // one entry per read that delivered body bytes
  std::string error;
};

inline StreamResult stream_request(int port, const std::string& path, const std::string& body,
                                   double timeout_s = 10, size_t hang_up_after_bytes = 0) {
  StreamResult result;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    result.error = "connect failed";
    return result;
  }
  std::string request = "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
                        "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != ssize_t(request.size())) {
    ::close(fd);
    result.error = "send failed";
    return result;
  }
  HttpParser parser(HttpParser::Kind::kResponse);
  int64_t deadline = monotonic_ns() + int64_t(timeout_s * 1e9);
  char buffer[65536];
  while (true) {
    int64_t left_ms = (deadline - monotonic_ns()) / 1'000'000;
    pollfd p{fd, POLLIN, 0};
    if (left_ms <= 0 || ::poll(&p, 1, int(left_ms)) <= 0) {
      result.error = "timed out";
      break;
    }
    ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) {
      result.complete = parser.state() == HttpParser::State::kDone || parser.finish_on_eof();
      if (!result.complete) result.error = "connection closed mid-reply";
      break;
    }
    size_t before = result.body.size();
    parser.feed(std::string_view(buffer, size_t(n)), result.body);
    if (result.body.size() > before) result.arrival_ns.push_back(monotonic_ns());
    if (parser.state() == HttpParser::State::kError) {
      result.error = "bad reply";
      break;
    }
    if (parser.head_complete()) {
      result.status = parser.head().status;
      result.content_type = std::string(parser.head().header("content-type"));
    }
    if (parser.state() == HttpParser::State::kDone) {
      result.complete = true;
      break;
    }
    if (hang_up_after_bytes && result.body.size() >= hang_up_after_bytes) break;
  }
  ::close(fd);
  return result;
}

}  // namespace gpufrac::testing
