#include "node/upstream_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "common/http_parser.h"
#include "common/log.h"

namespace gpufrac {
namespace {

struct Exchange {
  uint64_t id = 0;
  int fd = -1;
  ProxyRequest request;
  std::shared_ptr<HttpResponse> response;
  std::function<void(ProxyOutcome)> on_done;
  std::string out;  // the request bytes still to send
  size_t out_offset = 0;
  bool connected = false;
  HttpParser parser{HttpParser::Kind::kResponse};
  bool head_handled = false;
  bool streaming = false;
  std::string body;  // the body of a Content-Length reply, sent on once complete
};

std::string request_bytes(const ProxyRequest& r) {
  std::string out = r.method + " " + r.target + " HTTP/1.1\r\nHost: 127.0.0.1:" +
                    std::to_string(r.port) + "\r\nConnection: close\r\n";
  for (const std::string& line : r.headers) out += line + "\r\n";
  if (!r.body.empty() || r.method == "POST") {
    out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  }
  out += "\r\n";
  out += r.body;
  return out;
}

}  // namespace

class UpstreamProxy::Loop {
 public:
  explicit Loop(std::atomic<size_t>& active) : active_(active) {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = 0;  // exchange ids start at 1
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
    thread_ = std::thread([this] { run(); });
  }

  ~Loop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake();
    thread_.join();
    ::close(epoll_fd_);
    ::close(wake_fd_);
  }

  void post_new(std::unique_ptr<Exchange> exchange) {
    {
      std::lock_guard lock(mutex_);
      incoming_.push_back(std::move(exchange));
    }
    wake();
  }

  void post_cancel(uint64_t id) {
    {
      std::lock_guard lock(mutex_);
      cancels_.push_back(id);
    }
    wake();
  }

  uint64_t next_id() { return ++last_id_; }

 private:
  void wake() {
    uint64_t one = 1;
    ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
    (void)ignored;
  }

  void run() {
    epoll_event events[64];
    while (true) {
      int n = ::epoll_wait(epoll_fd_, events, 64, -1);
      if (n < 0 && errno != EINTR) break;
      for (int i = 0; i < n; ++i) {
        uint64_t id = events[i].data.u64;
        if (id == 0) {
          uint64_t count;
          while (::read(wake_fd_, &count, sizeof count) > 0) {
          }
          if (!take_posted()) return;
          continue;
        }
        auto it = exchanges_.find(id);
        if (it == exchanges_.end()) continue;
        on_ready(*it->second, events[i].events);
      }
    }
  }

  // Starts new exchanges and closes cancelled ones; false once the loop must stop.
  bool take_posted() {
    std::vector<std::unique_ptr<Exchange>> incoming;
    std::vector<uint64_t> cancels;
    bool stopping;
    {
      std::lock_guard lock(mutex_);
      incoming.swap(incoming_);
      cancels.swap(cancels_);
      stopping = stopping_;
    }
    for (auto& exchange : incoming) start(std::move(exchange));
    for (uint64_t id : cancels) {
      auto it = exchanges_.find(id);
      if (it != exchanges_.end()) finish(*it->second, ProxyOutcome::kClientGone);
    }
    if (stopping) {
      while (!exchanges_.empty()) {
        Exchange& e = *exchanges_.begin()->second;
        e.response->abort();
        finish(e, ProxyOutcome::kFailed);
      }
      return false;
    }
    return true;
  }

  // The connection was opened (and the request maybe sent) by forward(); watch it from here.
  void start(std::unique_ptr<Exchange> exchange) {
    Exchange& e = *exchange;
    exchanges_.emplace(e.id, std::move(exchange));
    epoll_event ev{};
    const bool writing = e.out_offset < e.out.size() || !e.connected;
    ev.events = EPOLLIN | EPOLLRDHUP | (writing ? uint32_t(EPOLLOUT) : 0u);
    ev.data.u64 = e.id;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, e.fd, &ev);
  }

  void refuse(Exchange& e) {
    send_openai_error(*e.response, 503,
                      "model '" + e.request.model + "' is not reachable right now (its engine is " +
                          "restarting); retry shortly");
    finish(e, ProxyOutcome::kRefused);
  }

  void on_ready(Exchange& e, uint32_t events) {
    if (!e.connected) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(e.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        refuse(e);
        return;
      }
      if (!(events & (EPOLLOUT | EPOLLIN))) return;
      e.connected = true;
    }
    if (e.out_offset < e.out.size() && (events & EPOLLOUT)) {
      ssize_t n = ::send(e.fd, e.out.data() + e.out_offset, e.out.size() - e.out_offset, MSG_NOSIGNAL);
      if (n > 0) e.out_offset += size_t(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) {
        fail(e, "could not send the request to the engine");
        return;
      }
      if (e.out_offset == e.out.size()) {
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLRDHUP;
        ev.data.u64 = e.id;
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, e.fd, &ev);
      }
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) read_reply(e);
  }

  void read_reply(Exchange& e) {
    char buffer[65536];
    while (true) {
      ssize_t n = ::recv(e.fd, buffer, sizeof buffer, 0);
      if (n > 0) {
        if (!consume(e, std::string_view(buffer, size_t(n)))) return;
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      // EOF or a reset: the reply ends here.
      if (e.parser.state() != HttpParser::State::kDone && !e.parser.finish_on_eof()) {
        fail(e, "the engine closed the connection before its reply was complete");
        return;
      }
      complete(e);
      return;
    }
  }

  // Feeds reply bytes; false when the exchange has ended.
  bool consume(Exchange& e, std::string_view data) {
    std::string decoded;
    e.parser.feed(data, decoded);
    if (e.parser.state() == HttpParser::State::kError) {
      fail(e, "the engine's reply is not valid HTTP (" + std::string(e.parser.error_text()) + ")");
      return false;
    }
    if (e.parser.head_complete() && !e.head_handled) {
      e.head_handled = true;
      const HttpHead& head = e.parser.head();
      e.streaming = head.header("content-length").empty();
      if (e.streaming) {
        std::string_view type = head.header("content-type");
        e.response->start_stream(head.status, type.empty() ? "text/event-stream" : type);
      }
    }
    if (!decoded.empty()) {
      if (!e.streaming) {
        e.body += decoded;
      } else if (!e.response->write(decoded)) {
        finish(e, ProxyOutcome::kClientGone);
        return false;
      }
    }
    if (e.parser.state() == HttpParser::State::kDone) {
      complete(e);
      return false;
    }
    return true;
  }

  void complete(Exchange& e) {
    if (e.streaming) {
      e.response->end();
    } else {
      const HttpHead& head = e.parser.head();
      std::string_view type = head.header("content-type");
      e.response->send(head.status, type.empty() ? "application/json" : type, std::move(e.body));
    }
    finish(e, ProxyOutcome::kCompleted);
  }

  void fail(Exchange& e, const std::string& why) {
    log_warn("router: model ", e.request.model, ": ", why);
    if (e.head_handled && e.streaming) {
      e.response->abort();  // the client sees the stream cut, as it was
    } else {
      send_openai_error(*e.response, 502, "model '" + e.request.model + "': " + why);
    }
    finish(e, ProxyOutcome::kFailed);
  }

  void finish(Exchange& e, ProxyOutcome outcome) {
    if (e.fd >= 0) {
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, e.fd, nullptr);
      ::close(e.fd);
    }
    auto on_done = std::move(e.on_done);
    exchanges_.erase(e.id);  // destroys e
    active_--;
    if (on_done) on_done(outcome);
  }

  std::atomic<size_t>& active_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Exchange>> incoming_;
  std::vector<uint64_t> cancels_;
  bool stopping_ = false;
  std::atomic<uint64_t> last_id_{0};
  std::unordered_map<uint64_t, std::unique_ptr<Exchange>> exchanges_;  // loop thread only
};

UpstreamProxy::UpstreamProxy() : loop_(std::make_unique<Loop>(active_)) {}

UpstreamProxy::~UpstreamProxy() { loop_.reset(); }

void UpstreamProxy::forward(ProxyRequest request, std::shared_ptr<HttpResponse> response,
                            std::function<void(ProxyOutcome)> on_done) {
  auto exchange = std::make_unique<Exchange>();
  Exchange& e = *exchange;
  e.id = loop_->next_id();
  e.out = request_bytes(request);
  e.request = std::move(request);
  e.response = response;
  e.on_done = std::move(on_done);
  // Connect and send on the caller's thread: a loopback connect completes (or is refused) at
  // once, so the engine gets the request without waiting for the proxy thread to wake up.
  e.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(e.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(e.request.port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int r = ::connect(e.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  if (r != 0 && errno != EINPROGRESS) {
    ::close(e.fd);
    send_openai_error(*response, 503,
                      "model '" + e.request.model + "' is not reachable right now (its engine is " +
                          "restarting); retry shortly");
    if (e.on_done) e.on_done(ProxyOutcome::kRefused);
    return;
  }
  if (r == 0) {
    e.connected = true;
    ssize_t n = ::send(e.fd, e.out.data(), e.out.size(), MSG_NOSIGNAL);
    if (n > 0) e.out_offset = size_t(n);
  }
  uint64_t id = e.id;
  active_++;
  loop_->post_new(std::move(exchange));
  Loop* loop = loop_.get();
  response->on_disconnect([loop, id] { loop->post_cancel(id); });
}

}  // namespace gpufrac
