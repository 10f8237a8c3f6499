#include "node/upstream_proxy.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <mutex>
#include <thread>
#include <unordered_map>

#include "common/epoll_set.h"
#include "common/http_client_connection.h"
#include "common/log.h"

namespace gpufrac {
namespace {

using ReplyStep = HttpClientConnection::ReplyStep;

struct Exchange {
  uint64_t id = 0;
  HttpClientConnection connection;
  ProxyRequest request;
  std::shared_ptr<HttpResponse> response;
  std::function<void(const ProxyResult&)> on_done;
  bool head_handled = false;
  bool streaming = false;
  bool relayed = false;  // some of the reply reached the client
  std::string body;      // the body of a Content-Length reply, sent on once complete
};

std::string request_bytes(const ProxyRequest& r) {
  return format_http_request(r.method, r.target, r.upstream, r.headers, r.body);
}

void answer_refused(HttpResponse& response, const std::string& model) {
  send_openai_error(response, 503,
                    "model '" + model + "' is not reachable right now (its engine is " +
                        "restarting); retry shortly");
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
    e.connection.watch(epoll_, e.id);
    if (e.connection.send_failed()) fail(e, "could not send the request to the engine");
  }

  void refuse(Exchange& e) {
    answer_refused(*e.response, e.request.model);
    finish(e, ProxyOutcome::kRefused);
  }

  void on_ready(Exchange& e, uint32_t events) {
    HttpClientConnection& c = e.connection;
    if ((c.connecting() || c.sending()) && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
      if (c.on_writable() != 0) {
        if (c.connect_failed()) {
          refuse(e);
        } else {
          fail(e, "could not send the request to the engine");
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
          if (relay(e, decoded)) complete(e);
          return;
        case ReplyStep::kMalformed:
          fail(e, "the engine's reply is not valid HTTP (" +
                      std::string(e.connection.parser().error_text()) + ")");
          return;
        case ReplyStep::kClosed:
          fail(e, "the engine closed the connection before its reply was complete");
          return;
      }
    }
  }

  // Passes on what the reply's latest bytes decoded to; false when the client has gone (the
  // exchange has ended).
  bool relay(Exchange& e, const std::string& decoded) {
    const HttpParser& parser = e.connection.parser();
    if (parser.head_complete() && !e.head_handled) {
      e.head_handled = true;
      const HttpHead& head = parser.head();
      e.streaming = head.header("content-length").empty();
      if (e.streaming) {
        std::string_view type = head.header("content-type");
        e.response->start_stream(head.status, type.empty() ? "text/event-stream" : type);
        e.relayed = true;
      }
    }
    if (decoded.empty()) return true;
    if (!e.streaming) {
      e.body += decoded;
    } else if (!e.response->write(decoded)) {
      finish(e, ProxyOutcome::kClientGone);
      return false;
    }
    return true;
  }

  void complete(Exchange& e) {
    if (e.streaming) {
      e.response->end();
    } else {
      const HttpHead& head = e.connection.parser().head();
      std::string_view type = head.header("content-type");
      e.response->send(head.status, type.empty() ? "application/json" : type, std::move(e.body));
      e.relayed = true;
    }
    finish(e, ProxyOutcome::kCompleted);
  }

  void fail(Exchange& e, const std::string& why) {
    log_warn("router: model ", e.request.model, ": ", why);
    if (e.relayed) {
      e.response->abort();  // the client sees the stream cut, as it was
    } else {
      send_openai_error(*e.response, 502, "model '" + e.request.model + "': " + why);
    }
    finish(e, ProxyOutcome::kFailed);
  }

  void finish(Exchange& e, ProxyOutcome outcome) {
    ProxyResult result{outcome, e.relayed};
    auto on_done = std::move(e.on_done);
    exchanges_.erase(e.id);  // destroys e, closing the upstream connection
    active_--;
    if (on_done) on_done(result);
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

void UpstreamProxy::forward(ProxyRequest request, std::shared_ptr<HttpResponse> response,
                            std::function<void(const ProxyResult&)> on_done) {
  auto exchange = std::make_unique<Exchange>();
  Exchange& e = *exchange;
  e.id = loop_->next_id();
  e.request = std::move(request);
  e.response = response;
  e.on_done = std::move(on_done);
  // Connect and send on the caller's thread: a loopback connect completes (or is refused) at
  // once, so the engine gets the request without waiting for the proxy thread to wake up.
  if (e.connection.connect(e.request.upstream.socket) != 0) {
    answer_refused(*response, e.request.model);
    if (e.on_done) e.on_done(ProxyResult{ProxyOutcome::kRefused, false});
    return;
  }
  e.connection.send_request(request_bytes(e.request));
  uint64_t id = e.id;
  active_++;
  loop_->post_new(std::move(exchange));
  Loop* loop = loop_.get();
  response->on_disconnect([loop, id] { loop->post_cancel(id); });
}

}  // namespace gpufrac
