#include "node/upstream_proxy.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <mutex>
#include <thread>
#include <unordered_map>

#include "common/epoll_set.h"
#include "common/http_client_connection.h"

namespace gpufrac {
namespace {

using ReplyStep = HttpClientConnection::ReplyStep;

struct Exchange {
  uint64_t id = 0;
  HttpClientConnection connection;
  ProxyRequest request;
  std::shared_ptr<ProxyReplyHandler> handler;
  bool head_handled = false;
};

std::string request_bytes(const ProxyRequest& r) {
  return format_http_request(r.method, r.target, r.upstream, r.headers, r.body);
}

}  // namespace

class UpstreamProxy::Loop {
 public:
  explicit Loop(std::atomic<size_t>& active) : active_(active) {
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epoll_.add(wake_fd_, kWakeKey, EPOLLIN);
    thread_ = std::thread([this] { run(); });
  }

  ~Loop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake();
    thread_.join();
    epoll_.remove(wake_fd_);
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
  static constexpr uint64_t kWakeKey = 0;  // exchange ids start at 1

  void wake() {
    uint64_t one = 1;
    ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
    (void)ignored;
  }

  void run() {
    std::vector<epoll_event> events(64);
    while (true) {
      int n = epoll_.wait(events, -1);
      if (n < 0) break;
      for (int i = 0; i < n; ++i) {
        uint64_t id = events[size_t(i)].data.u64;
        if (id == kWakeKey) {
          uint64_t count;
          while (::read(wake_fd_, &count, sizeof count) > 0) {
          }
          if (!take_posted()) return;
          continue;
        }
        auto it = exchanges_.find(id);
        if (it == exchanges_.end()) continue;
        on_ready(*it->second, events[size_t(i)].events);
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
      if (it != exchanges_.end()) finish(*it->second, ProxyOutcome::kCancelled, "cancelled");
    }
    if (stopping) {
      while (!exchanges_.empty()) {
        finish(*exchanges_.begin()->second, ProxyOutcome::kCancelled, "the router is stopping");
      }
      return false;
    }
    return true;
  }

  // The connection was opened (and the request maybe sent) by forward(); watch it from here.
  void start(std::unique_ptr<Exchange> exchange) {
    Exchange& e = *exchange;
    exchanges_.emplace(e.id, std::move(exchange));
    e.connection.watch(epoll_, e.id);
    if (e.connection.send_failed()) {
      finish(e, ProxyOutcome::kFailed, "could not send the request to the engine");
    }
  }

  void on_ready(Exchange& e, uint32_t events) {
    HttpClientConnection& c = e.connection;
    if ((c.connecting() || c.sending()) && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
      if (c.on_writable() != 0) {
        if (c.connect_failed()) {
          finish(e, ProxyOutcome::kRefused, connect_failure(e.request.upstream, c.error()));
        } else {
          finish(e, ProxyOutcome::kFailed, "could not send the request to the engine");
        }
        return;
      }
    }
    if (!c.connecting() && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) read_reply(e);
  }

  void read_reply(Exchange& e) {
    std::string decoded;
    while (true) {
      decoded.clear();
      switch (e.connection.read_reply(decoded)) {
        case ReplyStep::kWouldBlock:
          return;
        case ReplyStep::kProgress:
          if (!relay(e, decoded)) return;
          break;
        case ReplyStep::kComplete:
          if (relay(e, decoded)) finish(e, ProxyOutcome::kCompleted, "");
          return;
        case ReplyStep::kMalformed:
          finish(e, ProxyOutcome::kMalformed,
                 "the engine's reply is not valid HTTP (" +
                     std::string(e.connection.parser().error_text()) + ")");
          return;
        case ReplyStep::kClosed:
          finish(e, ProxyOutcome::kFailed,
                 "the engine closed the connection before its reply was complete");
          return;
      }
    }
  }

  // Hands the reply's latest bytes to the handler; false when the exchange has ended.
  bool relay(Exchange& e, const std::string& decoded) {
    const HttpParser& parser = e.connection.parser();
    if (parser.head_complete() && !e.head_handled) {
      e.head_handled = true;
      e.handler->on_reply_head(parser.head());
    }
    if (decoded.empty() || e.handler->on_reply_body(decoded)) return true;
    finish(e, ProxyOutcome::kCancelled, "the client has gone");
    return false;
  }

  void finish(Exchange& e, ProxyOutcome outcome, std::string error) {
    ProxyResult result{outcome, e.connection.reply_started(), std::move(error)};
    std::shared_ptr<ProxyReplyHandler> handler = std::move(e.handler);
    exchanges_.erase(e.id);  // destroys e, closing the upstream connection
    active_--;
    handler->on_end(result);
  }

  std::atomic<size_t>& active_;
  EpollSet epoll_;  // before exchanges_: their connections leave it as they close
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

UpstreamProxy::~UpstreamProxy() {
  loop_.reset();
}

uint64_t UpstreamProxy::forward(ProxyRequest request, std::shared_ptr<ProxyReplyHandler> handler) {
  auto exchange = std::make_unique<Exchange>();
  Exchange& e = *exchange;
  e.id = loop_->next_id();
  e.request = std::move(request);
  e.handler = std::move(handler);
  // Connect and send on the caller's thread: a loopback connect completes (or is refused) at
  // once, so the engine gets the request without waiting for the proxy thread to wake up.
  if (int error = e.connection.connect(e.request.upstream.socket); error != 0) {
    e.handler->on_end({ProxyOutcome::kRefused, false, connect_failure(e.request.upstream, error)});
    return 0;
  }
  e.connection.send_request(request_bytes(e.request));
  uint64_t id = e.id;
  active_++;
  loop_->post_new(std::move(exchange));
  return id;
}

void UpstreamProxy::cancel(uint64_t id) {
  if (id != 0) loop_->post_cancel(id);
}

}  // namespace gpufrac
