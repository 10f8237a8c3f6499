#include "common/http_client_connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "common/epoll_set.h"

namespace gpufrac {

HttpClientConnection::~HttpClientConnection() {
  if (fd_ < 0) return;
  if (epoll_) epoll_->remove(fd_);
  ::close(fd_);
}

int HttpClientConnection::connect(const SocketAddress& address) {
  fd_ = ::socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    fail_connect(errno);
    return error_;
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd_, address.as_sockaddr(), address.length) == 0) return 0;
  if (errno == EINPROGRESS) {
    connecting_ = true;
    return 0;
  }
  fail_connect(errno);
  return error_;
}

void HttpClientConnection::watch(EpollSet& epoll, uint64_t key) {
  epoll_ = &epoll;
  key_ = key;
  watched_events_ = wanted_events();
  epoll.add(fd_, key_, watched_events_);
}

uint32_t HttpClientConnection::wanted_events() const {
  return EPOLLIN | EPOLLRDHUP | (connecting_ || sending() ? uint32_t(EPOLLOUT) : 0u);
}

void HttpClientConnection::update_interest() {
  if (!epoll_ || watched_events_ == wanted_events()) return;
  watched_events_ = wanted_events();
  epoll_->modify(fd_, key_, watched_events_);
}

int HttpClientConnection::send_request(std::string request, bool reply_has_no_body) {
  request_ = std::move(request);
  sent_ = 0;
  parser_.reset();
  if (reply_has_no_body) parser_.expect_no_body();
  reply_started_ = false;
  bytes_after_reply_ = false;
  send_failed_ = false;
  int error = connecting_ ? 0 : flush();
  update_interest();
  return error;
}

int HttpClientConnection::on_writable() {
  if (connecting_) {
    int so_error = 0;
    socklen_t length = sizeof so_error;
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &so_error, &length);
    connecting_ = false;
    if (so_error != 0) {
      fail_connect(so_error);
      update_interest();
      return so_error;
    }
  }
  int error = flush();
  update_interest();
  return error;
}

void HttpClientConnection::fail_connect(int error) {
  connect_failed_ = true;
  error_ = error;
  request_.clear();  // never sent
  sent_ = 0;
}

int HttpClientConnection::flush() {
  while (sending()) {
    ssize_t n = ::send(fd_, request_.data() + sent_, request_.size() - sent_, MSG_NOSIGNAL);
    if (n > 0) {
      sent_ += size_t(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return 0;
    } else {
      error_ = n < 0 ? errno : EPIPE;
      send_failed_ = true;
      request_.clear();  // dropped: reading reports how the connection ended
      sent_ = 0;
      return error_;
    }
  }
  request_.clear();
  sent_ = 0;
  return 0;
}

HttpClientConnection::Received HttpClientConnection::receive(char* buffer, size_t capacity) {
  ssize_t n = ::recv(fd_, buffer, capacity, 0);
  if (n > 0) {
    reply_started_ = true;
    return {Received::Kind::kBytes, size_t(n), 0};
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return {};
  int error = n < 0 ? errno : 0;
  if (connecting_) {  // the connect failed: its error, if the read did not already say it
    int so_error = 0;
    socklen_t length = sizeof so_error;
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &so_error, &length);
    if (error == 0) error = so_error != 0 ? so_error : ECONNREFUSED;
    connecting_ = false;
    fail_connect(error);
  }
  return {Received::Kind::kEnded, 0, error};
}

HttpClientConnection::ReplyStep HttpClientConnection::take(std::string_view bytes,
                                                           std::string& body_out) {
  size_t used = parser_.feed(bytes, body_out);
  switch (parser_.state()) {
    case HttpParser::State::kError:
      return ReplyStep::kMalformed;
    case HttpParser::State::kDone:
      bytes_after_reply_ = used < bytes.size();
      return ReplyStep::kComplete;
    default:
      return ReplyStep::kProgress;
  }
}

HttpClientConnection::ReplyStep HttpClientConnection::end_of_input(int error) {
  input_ended_ = true;
  if (error != 0) error_ = error;
  if (parser_.state() == HttpParser::State::kDone) return ReplyStep::kComplete;
  if (error == 0 && parser_.finish_on_eof()) return ReplyStep::kComplete;
  return ReplyStep::kClosed;
}

HttpClientConnection::ReplyStep HttpClientConnection::read_reply(std::string& body_out) {
  char buffer[64 * 1024];
  Received read = receive(buffer, sizeof buffer);
  switch (read.kind) {
    case Received::Kind::kNothing:
      return ReplyStep::kWouldBlock;
    case Received::Kind::kEnded:
      return end_of_input(read.error);
    case Received::Kind::kBytes:
      break;
  }
  return take(std::string_view(buffer, read.bytes), body_out);
}

HttpClientConnection::ReplyStep HttpClientConnection::wait_for_reply(int64_t deadline_ns,
                                                                     std::string& body_out) {
  while (!connect_failed_ && !send_failed_) {
    int64_t left_ms = (deadline_ns - monotonic_ns()) / 1'000'000;
    if (left_ms <= 0) return ReplyStep::kWouldBlock;
    pollfd ready{fd_, short(wanted_events()), 0};
    int rc = ::poll(&ready, 1, int(std::min<int64_t>(left_ms, INT32_MAX)));
    if (rc < 0 && errno != EINTR) return end_of_input(errno);
    if (rc <= 0) continue;
    if ((ready.revents & (POLLOUT | POLLERR | POLLHUP)) && (connecting_ || sending())) {
      if (on_writable() != 0) break;
    }
    if (ready.revents & (POLLIN | POLLRDHUP | POLLERR | POLLHUP)) {
      ReplyStep step = ReplyStep::kProgress;
      while (step == ReplyStep::kProgress) step = read_reply(body_out);
      if (step != ReplyStep::kWouldBlock) return step;
    }
  }
  return ReplyStep::kClosed;
}

bool HttpClientConnection::reusable() const {
  return parser_.state() == HttpParser::State::kDone && !bytes_after_reply_ && !input_ended_ &&
         parser_.head().keep_alive();
}

std::string connect_failure(const ServerAddress& server, int error) {
  return "cannot connect to " + server.authority() + ": " + std::strerror(error);
}

std::string format_http_request(std::string_view method, std::string_view target,
                                const ServerAddress& server,
                                const std::vector<std::string>& header_lines,
                                std::string_view body) {
  std::string request = std::string(method) + " " + std::string(target) +
                        " HTTP/1.1\r\nHost: " + server.authority() + "\r\nConnection: close\r\n";
  for (const std::string& line : header_lines) request += line + "\r\n";
  if (!body.empty() || method == "POST" || method == "PUT") {
    request += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  request += "\r\n";
  request += body;
  return request;
}

}  // namespace gpufrac
