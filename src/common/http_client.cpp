#include "common/http_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "common/error.h"
#include "common/http_parser.h"
#include "common/strings.h"

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
  SocketAddress address;
  if (!resolve_socket_address(url, address, error)) return -1;
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
    error = "cannot connect to " + url.host + ":" + std::to_string(url.port) + ": " +
            std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

bool resolve_socket_address(const HttpUrl& url, SocketAddress& out, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::string port = std::to_string(url.port);
  if (int rc = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    error = "cannot resolve " + url.host + ": " + ::gai_strerror(rc);
    return false;
  }
  std::memcpy(&out.storage, found->ai_addr, found->ai_addrlen);
  out.length = found->ai_addrlen;
  ::freeaddrinfo(found);
  return true;
}

HttpUrl parse_http_url(std::string_view url, std::string_view what) {
  auto bad = [&](std::string_view why) {
    return UsageError(std::string(what) + ": '" + std::string(url) + "' is not an http URL (" +
                      std::string(why) + "; e.g. http://127.0.0.1:8000)");
  };
  if (!starts_with(url, "http://")) throw bad("it must start with http://");
  std::string_view rest = url.substr(7);
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  HttpUrl parsed;
  parsed.path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  size_t colon = authority.rfind(':');
  if (!authority.empty() && authority.front() == '[') {  // [::1]:8000
    size_t close = authority.find(']');
    if (close == std::string_view::npos) throw bad("unclosed [");
    parsed.host = std::string(authority.substr(1, close - 1));
    colon = authority.find(':', close);
  } else {
    parsed.host = std::string(authority.substr(0, colon));
  }
  if (parsed.host.empty()) throw bad("no host");
  if (colon != std::string_view::npos) {
    int64_t port = parse_int(authority.substr(colon + 1), what);
    if (port <= 0 || port > 65535) throw bad("port out of range");
    parsed.port = int(port);
  }
  return parsed;
}

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

  std::string request = std::string(method) + " " + target.path + " HTTP/1.1\r\nHost: " +
                        target.host + ":" + std::to_string(target.port) +
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
