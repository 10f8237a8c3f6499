#include "common/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "common/error.h"
#include "common/json.h"
#include "common/log.h"

namespace gpufrac {

// Wakes the loop thread from other threads; outlives the server while response handles exist.
struct LoopWaker {
  int event_fd = -1;
  std::mutex mutex;
  std::vector<std::shared_ptr<HttpConnectionState>> dirty;
  bool stopped = false;
  ~LoopWaker() {
    if (event_fd >= 0) ::close(event_fd);
  }
};

// One client connection. Fields under `mutex` are touched by response handles on any thread;
// the rest belong to the loop thread.
class HttpConnectionState : public std::enable_shared_from_this<HttpConnectionState> {
 public:
  std::shared_ptr<LoopWaker> waker;
  std::mutex mutex;
  std::string out;          // bytes waiting to be sent
  bool closed = false;      // the socket is gone: drop writes
  bool in_response = false; // a request was handed to a handler and its response isn't finished
  bool response_done = false;
  bool chunked = false;
  bool keep_alive = true;
  bool abort_requested = false;  // close once `out` is flushed, response unfinished
  uint64_t sequence = 0;    // which request's response is current
  std::function<void()> on_disconnect;

  // Loop-thread state.
  int fd = -1;
  HttpParser parser{HttpParser::Kind::kRequest};
  std::string in;           // received, not yet parsed
  HttpRequest request;
  bool want_write = false;
  bool dirty_queued = false;  // under waker->mutex

  // Appends under `mutex` (held by caller) and asks the loop to flush.
  void notify_locked_out() {
    std::lock_guard wake_lock(waker->mutex);
    if (waker->stopped || dirty_queued) return;
    dirty_queued = true;
    bool was_empty = waker->dirty.empty();
    waker->dirty.push_back(shared_from_this());
    if (was_empty) {
      uint64_t one = 1;
      ssize_t ignored = ::write(waker->event_fd, &one, sizeof one);
      (void)ignored;
    }
  }
};

namespace {

std::string default_error_type(int status) {
  if (status == 401) return "authentication_error";
  if (status == 403) return "permission_error";
  if (status == 404) return "not_found_error";
  if (status == 429) return "rate_limit_exceeded";
  if (status >= 500) return status == 503 ? "service_unavailable" : "internal_server_error";
  return "invalid_request_error";
}

std::string response_head(int status, std::string_view content_type, bool keep_alive,
                          const std::vector<std::string>& extra, std::string_view framing) {
  std::string head = "HTTP/1.1 " + std::to_string(status) + " " + std::string(http_reason(status)) +
                     "\r\nContent-Type: " + std::string(content_type) + "\r\n";
  head += framing;
  for (const std::string& line : extra) head += line + "\r\n";
  if (!keep_alive) head += "Connection: close\r\n";
  head += "\r\n";
  return head;
}


}  // namespace

std::string openai_error_body(std::string_view message, std::string_view type,
                              std::string_view param, std::string_view code) {
  Json error = {{"message", message}, {"type", type}};
  error["param"] = param.empty() ? Json(nullptr) : Json(param);
  error["code"] = code.empty() ? Json(nullptr) : Json(code);
  // The message may quote request bytes that are not UTF-8 (a path, a cut value): replaced with
  // U+FFFD, so an error answer can always be written (a throw here would end the process).
  return Json{{"error", error}}.dump(-1, ' ', false, Json::error_handler_t::replace);
}

void send_openai_error(HttpResponse& response, int status, std::string_view message,
                       std::string_view param) {
  response.send(status, "application/json",
                openai_error_body(message, default_error_type(status), param,
                                  std::to_string(status)));
}

// ---------------------------------------------------------------------------------------------
// HttpResponse

HttpResponse::HttpResponse(std::shared_ptr<HttpConnectionState> connection, uint64_t sequence)
    : connection_(std::move(connection)), sequence_(sequence) {}

void HttpResponse::send(int status, std::string_view content_type, std::string body,
                        std::vector<std::string> extra_headers) {
  HttpConnectionState& c = *connection_;
  std::lock_guard lock(c.mutex);
  if (c.closed || c.sequence != sequence_ || !c.in_response || c.response_done) return;
  c.out += response_head(status, content_type, c.keep_alive, extra_headers,
                         "Content-Length: " + std::to_string(body.size()) + "\r\n");
  c.out += body;
  c.response_done = true;
  c.notify_locked_out();
}

void HttpResponse::start_stream(int status, std::string_view content_type,
                                std::vector<std::string> extra_headers) {
  HttpConnectionState& c = *connection_;
  std::lock_guard lock(c.mutex);
  if (c.closed || c.sequence != sequence_ || c.chunked || c.response_done) return;
  extra_headers.push_back("Cache-Control: no-cache");
  c.out += response_head(status, content_type, c.keep_alive, extra_headers,
                         "Transfer-Encoding: chunked\r\n");
  c.chunked = true;
  c.notify_locked_out();
}

bool HttpResponse::write(std::string_view data) {
  HttpConnectionState& c = *connection_;
  std::lock_guard lock(c.mutex);
  if (c.closed || c.sequence != sequence_ || !c.chunked || c.response_done) return false;
  if (data.empty()) return true;  // an empty chunk would end the stream
  char size[20];
  int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  c.out.append(size, size_t(n));
  c.out.append(data);
  c.out += "\r\n";
  c.notify_locked_out();
  return true;
}

void HttpResponse::end() {
  HttpConnectionState& c = *connection_;
  std::lock_guard lock(c.mutex);
  if (c.closed || c.sequence != sequence_ || !c.chunked || c.response_done) return;
  c.out += "0\r\n\r\n";
  c.response_done = true;
  c.notify_locked_out();
}

void HttpResponse::abort() {
  HttpConnectionState& c = *connection_;
  std::lock_guard lock(c.mutex);
  if (c.closed || c.sequence != sequence_ || c.response_done) return;
  c.abort_requested = true;
  c.notify_locked_out();
}

bool HttpResponse::client_gone() const {
  std::lock_guard lock(connection_->mutex);
  return connection_->closed;
}

void HttpResponse::on_disconnect(std::function<void()> callback) {
  HttpConnectionState& c = *connection_;
  bool run_now = false;
  {
    std::lock_guard lock(c.mutex);
    if (c.sequence != sequence_ || c.response_done) return;
    if (c.closed) run_now = true;
    else c.on_disconnect = std::move(callback);
  }
  if (run_now) callback();
}

// ---------------------------------------------------------------------------------------------
// The loop

class HttpServer::Loop {
 public:
  Loop(HttpServer& server, int listen_fd) : server_(server), listen_fd_(listen_fd) {
    waker_ = std::make_shared<LoopWaker>();
    waker_->event_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    add(listen_fd_, EPOLLIN);
    add(waker_->event_fd, EPOLLIN);
    thread_ = std::thread([this] { run(); });
  }

  ~Loop() {
    {
      std::lock_guard lock(waker_->mutex);
      waker_->stopped = true;
    }
    uint64_t one = 1;
    ssize_t ignored = ::write(waker_->event_fd, &one, sizeof one);
    (void)ignored;
    thread_.join();
    auto open = connections_;
    for (auto& [fd, connection] : open) close_connection(connection);
    ::close(listen_fd_);
    ::close(epoll_fd_);
  }

 private:
  void add(int fd, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }

  void run() {
    epoll_event events[256];
    while (true) {
      int n = ::epoll_wait(epoll_fd_, events, 256, -1);
      if (n < 0 && errno != EINTR) break;
      for (int i = 0; i < n; ++i) {
        int fd = events[i].data.fd;
        if (fd == listen_fd_) {
          accept_all();
        } else if (fd == waker_->event_fd) {
          if (!drain_waker()) return;
        } else {
          auto it = connections_.find(fd);
          if (it == connections_.end()) continue;
          std::shared_ptr<HttpConnectionState> c = it->second;
          if (events[i].events & EPOLLOUT) flush(c);
          if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) on_readable(c);
        }
      }
    }
  }

  // Returns false when the server is stopping.
  bool drain_waker() {
    uint64_t count;
    ssize_t ignored = ::read(waker_->event_fd, &count, sizeof count);
    (void)ignored;
    std::vector<std::shared_ptr<HttpConnectionState>> dirty;
    {
      std::lock_guard lock(waker_->mutex);
      if (waker_->stopped) return false;
      dirty.swap(waker_->dirty);
      for (auto& c : dirty) c->dirty_queued = false;
    }
    for (auto& c : dirty) {
      if (c->fd >= 0) flush(c);
    }
    return true;
  }

  void accept_all() {
    while (true) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (connections_.size() >= size_t(server_.options_.max_connections)) {
        std::string body = openai_error_body("too many connections", "service_unavailable");
        std::string reply = response_head(503, "application/json", false, {},
                                          "Content-Length: " + std::to_string(body.size()) +
                                              "\r\n") +
                            body;
        ssize_t ignored = ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
        (void)ignored;
        ::close(fd);
        continue;
      }
      auto c = std::make_shared<HttpConnectionState>();
      c->waker = waker_;
      c->fd = fd;
      c->parser = HttpParser(HttpParser::Kind::kRequest, 64 * 1024, server_.options_.max_body_bytes);
      connections_[fd] = c;
      server_.open_connections_ = connections_.size();
      add(fd, EPOLLIN | EPOLLRDHUP);
    }
  }

  void on_readable(const std::shared_ptr<HttpConnectionState>& c) {
    char buffer[16384];
    while (c->fd >= 0) {
      ssize_t n = ::recv(c->fd, buffer, sizeof buffer, 0);
      if (n > 0) {
        c->in.append(buffer, size_t(n));
        if (c->in.size() > server_.options_.max_body_bytes + (1 << 20)) {
          close_connection(c);  // a client flooding pipelined data while we answer
          return;
        }
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0 && errno == EINTR) continue;
      close_connection(c);  // EOF or error: the client is gone
      return;
    }
    process_input(c);
  }

  // Parses buffered input into requests while no response is outstanding.
  void process_input(const std::shared_ptr<HttpConnectionState>& c) {
    while (c->fd >= 0 && !c->in.empty()) {
      {
        std::lock_guard lock(c->mutex);
        if (c->in_response) return;  // one request at a time per connection keeps replies ordered
      }
      size_t used = c->parser.feed(c->in, c->request.body);
      c->in.erase(0, used);
      if (c->parser.state() == HttpParser::State::kError) {
        reject(c, c->parser.error());
        return;
      }
      if (c->parser.state() != HttpParser::State::kDone) return;
      c->request.head = c->parser.head();
      c->parser.reset();
      dispatch(c);
    }
  }

  void reject(const std::shared_ptr<HttpConnectionState>& c, HttpParser::Error error) {
    int status = error == HttpParser::Error::kHeadTooLarge   ? 431
                 : error == HttpParser::Error::kBodyTooLarge ? 413
                                                             : 400;
    std::string message = std::string(c->parser.error_text());
    if (status == 413) {
      message += " (limit " + std::to_string(server_.options_.max_body_bytes) + " bytes)";
    }
    std::string body = openai_error_body(message, "invalid_request_error", {},
                                         std::to_string(status));
    {
      std::lock_guard lock(c->mutex);
      c->keep_alive = false;
      c->in_response = true;
      c->response_done = true;
      c->out += response_head(status, "application/json", false, {},
                              "Content-Length: " + std::to_string(body.size()) + "\r\n");
      c->out += body;
    }
    c->in.clear();
    flush(c);
  }

  void dispatch(const std::shared_ptr<HttpConnectionState>& c) {
    uint64_t sequence;
    {
      std::lock_guard lock(c->mutex);
      c->in_response = true;
      c->response_done = false;
      c->chunked = false;
      c->keep_alive = c->request.head.keep_alive();
      c->on_disconnect = nullptr;
      sequence = ++c->sequence;
    }
    HttpRequest request = std::move(c->request);
    c->request = HttpRequest();
    auto response = std::shared_ptr<HttpResponse>(new HttpResponse(c, sequence));
    if (server_.gate_ && !server_.gate_(request, *response)) return;
    const Route* match = nullptr;
    bool path_known = false;
    for (const Route& r : server_.routes_) {
      bool prefix = !r.path.empty() && r.path.back() == '*';
      bool path_ok = prefix ? request.head.path.starts_with(r.path.substr(0, r.path.size() - 1))
                            : request.head.path == r.path;
      if (!path_ok) continue;
      path_known = true;
      if (r.method == request.head.method) {
        match = &r;
        break;
      }
    }
    if (!match) {
      if (path_known) {
        send_openai_error(*response, 405,
                          "method " + request.head.method + " is not allowed on " + request.head.path);
      } else {
        send_openai_error(*response, 404, "no such endpoint: " + request.head.path);
      }
      return;
    }
    try {
      match->handler(request, response);
    } catch (const std::exception& e) {
      log_error("handler for ", request.head.path, " threw: ", e.what());
      send_openai_error(*response, 500, std::string("internal error: ") + e.what());
    }
  }

  void flush(const std::shared_ptr<HttpConnectionState>& c) {
    bool finished = false;
    bool keep_alive = true;
    bool abort_now = false;
    {
      std::lock_guard lock(c->mutex);
      if (c->closed) return;
      while (!c->out.empty()) {
        ssize_t n = ::send(c->fd, c->out.data(), c->out.size(), MSG_NOSIGNAL);
        if (n > 0) {
          c->out.erase(0, size_t(n));
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        break;  // a real error: the read side will see it and close
      }
      set_want_write(*c, !c->out.empty());
      abort_now = c->out.empty() && c->abort_requested;
      if (c->out.empty() && c->in_response && c->response_done) {
        finished = true;
        keep_alive = c->keep_alive;
        c->in_response = false;
        c->on_disconnect = nullptr;
      }
    }
    if (abort_now) {
      close_connection(c);
      return;
    }
    if (!finished) return;
    if (!keep_alive) {
      close_connection(c);
      return;
    }
    process_input(c);  // a pipelined request may be waiting
  }

  void set_want_write(HttpConnectionState& c, bool want) {
    if (c.want_write == want) return;
    c.want_write = want;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | (want ? EPOLLOUT : 0u);
    ev.data.fd = c.fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
  }

  void close_connection(std::shared_ptr<HttpConnectionState> c) {
    std::function<void()> callback;
    {
      std::lock_guard lock(c->mutex);
      if (c->closed) return;
      c->closed = true;
      if (c->in_response && !c->response_done) callback = std::move(c->on_disconnect);
      c->on_disconnect = nullptr;
      c->out.clear();
    }
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
    ::close(c->fd);
    int fd = c->fd;
    c->fd = -1;
    connections_.erase(fd);
    server_.open_connections_ = connections_.size();
    if (callback) callback();
  }

  HttpServer& server_;
  int listen_fd_;
  int epoll_fd_ = -1;
  std::shared_ptr<LoopWaker> waker_;
  std::unordered_map<int, std::shared_ptr<HttpConnectionState>> connections_;
  std::thread thread_;
};

// ---------------------------------------------------------------------------------------------
// HttpServer

HttpServer::HttpServer(HttpServerOptions options) : options_(std::move(options)) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::route(std::string method, std::string path, HttpHandler handler) {
  routes_.push_back({std::move(method), std::move(path), std::move(handler)});
}

void HttpServer::start() {
  std::string address = options_.host + ":" + std::to_string(options_.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string port_text = std::to_string(options_.port);
  const char* host = options_.host.empty() ? nullptr : options_.host.c_str();
  if (int rc = ::getaddrinfo(host, port_text.c_str(), &hints, &found); rc != 0) {
    throw RuntimeFailure("cannot listen on " + address + ": " + ::gai_strerror(rc));
  }
  int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || ::bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, 4096) != 0) {
    std::string why = std::strerror(errno);
    ::freeaddrinfo(found);
    if (fd >= 0) ::close(fd);
    throw RuntimeFailure("cannot listen on " + address + ": " + why +
                         (errno == EADDRINUSE ? " (choose another --port)" : ""));
  }
  ::freeaddrinfo(found);
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  loop_ = std::make_unique<Loop>(*this, fd);
}

void HttpServer::stop() { loop_.reset(); }

}  // namespace gpufrac
