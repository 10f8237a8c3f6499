#include "common/http_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "common/error.h"
#include "common/http_parser.h"

namespace gpufrac {
namespace {

// Waits for `events` on fd until the deadline; false on timeout.
bool wait_for(int fd, short events, int64_t deadline_ns) {
  while (true) {
    int64_t left_ms = (deadline_ns - monotonic_ns()) / 1'000'000;
    if (left_ms <= 0) return false;
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, int(left_ms));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return true;  // let the following call report the error
  }
}

int connect_to(const HttpUrl& url, int64_t deadline_ns, std::string& error) {
  ServerAddress server;
  if (!resolve_server_address(url.host, url.port, server, error)) return -1;
  const SocketAddress& address = server.socket;
  int fd = ::socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int rc = fd < 0 ? -1 : ::connect(fd, address.as_sockaddr(), address.length);
  if (rc != 0 && errno == EINPROGRESS) {
    if (!wait_for(fd, POLLOUT, deadline_ns)) {
      ::close(fd);
      error = "connect timed out";
      return -1;
    }
    int so_error = 0;
    socklen_t length = sizeof so_error;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &length);
    rc = so_error == 0 ? 0 : -1;
    errno = so_error;
  }
  if (rc != 0) {
    error = "cannot connect to " + server.authority() + ": " + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

HttpReply http_request(std::string_view method, std::string_view url, std::string_view body,
                       double timeout_s, std::string_view content_type) {
  HttpReply reply;
  HttpUrl target;
  try {
    target = parse_http_url(url, "url");
  } catch (const UsageError& e) {
    reply.error = e.what();
    return reply;
  }
  int64_t deadline = monotonic_ns() + int64_t(timeout_s * 1e9);
  int fd = connect_to(target, deadline, reply.error);
  if (fd < 0) return reply;

  std::string request = std::string(method) + " " + target.path +
                        " HTTP/1.1\r\nHost: " + http_authority(target.host, target.port) +
                        "\r\nConnection: close\r\nAccept: */*\r\n";
  if (!body.empty() || method == "POST" || method == "PUT") {
    request += "Content-Type: " + std::string(content_type) +
               "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  request += "\r\n";
  request += body;

  size_t sent = 0;
  while (sent < request.size()) {
    if (!wait_for(fd, POLLOUT, deadline)) {
      reply.error = "timed out sending the request";
      ::close(fd);
      return reply;
    }
    ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) {
      reply.error = std::string("send failed: ") + std::strerror(errno);
      ::close(fd);
      return reply;
    }
    sent += size_t(n);
  }

  HttpParser parser(HttpParser::Kind::kResponse);
  if (method == "HEAD") parser.expect_no_body();
  char buffer[16384];
  while (parser.state() != HttpParser::State::kDone) {
    if (!wait_for(fd, POLLIN, deadline)) {
      reply.error = "timed out waiting for the reply";
      break;
    }
    ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) {
      if (!parser.finish_on_eof()) reply.error = "connection closed before the reply was complete";
      break;
    }
    parser.feed(std::string_view(buffer, size_t(n)), reply.body);
    if (parser.state() == HttpParser::State::kError) {
      reply.error = std::string(parser.error_text());
      break;
    }
  }
  ::close(fd);
  if (parser.state() == HttpParser::State::kDone) {
    reply.status = parser.head().status;
    reply.content_type = std::string(parser.head().header("content-type"));
    reply.error.clear();
  }
  return reply;
}

}  // namespace gpufrac
