#include "bench/stream_client.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstring>

#include "bench/sse_parser.h"
#include "bench/stream_event.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/http_client_connection.h"
#include "common/json.h"

namespace gpufrac {
namespace {

constexpr size_t kReadSize = 64 * 1024;
constexpr size_t kMaxErrorBody = 64 * 1024;
constexpr int kMaxEvents = 1024;

std::string describe_errno(int error) {
  return std::strerror(error);
}

}  // namespace

std::string error_from_body(int status, const std::string& body) {
  Json j = Json::parse(body, nullptr, false);
  std::string message;
  if (j.is_object()) {
    if (auto e = j.find("error"); e != j.end()) {
      if (e->is_object() && e->contains("message") && (*e)["message"].is_string()) {
        message = (*e)["message"].get<std::string>();
      } else if (e->is_string()) {
        message = e->get<std::string>();
      }
    } else if (j.contains("message") && j["message"].is_string()) {
      message = j["message"].get<std::string>();
    }
  }
  if (message.empty()) message = body.substr(0, 200);
  return "HTTP " + std::to_string(status) + ": " + message;
}

struct StreamClient::Endpoint {
  ServerAddress server;
  std::string head_prefix;  // request line and fixed headers
};

// One request in progress: what was asked, what has come back.
struct StreamClient::Exchange {
  StreamRequest request;
  std::string wire;  // the full HTTP request
  RequestRecord record;
  int64_t deadline_ns = 0;
  bool retried = false;
  bool head_checked = false;
  bool event_stream = false;  // 200 with text/event-stream
  bool done_seen = false;
  std::string error_body;  // non-200 replies, or a 200 that is not a stream
  std::optional<int64_t> usage_prompt, usage_completion;
};

struct StreamClient::Connection {
  uint64_t id = 0;
  int target = 0;
  bool reused = false;
  HttpClientConnection http;
  SseParser sse;
  std::string body;                    // decoded body bytes of the current feed
  std::vector<SseMessage> messages;    // scratch
  std::unique_ptr<Exchange> exchange;  // null while idle
  bool closed_in_batch = false;        // EOF or error seen by this wake-up's reads
  int close_error = 0;
  int64_t close_ns = 0;
};

uint64_t raise_open_file_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
    ::getrlimit(RLIMIT_NOFILE, &limit);
  }
  return limit.rlim_cur;
}

StreamClient::StreamClient(std::vector<HttpUrl> urls, double request_timeout_s,
                           const std::vector<std::string>& api_keys)
    : timeout_ns_(int64_t(request_timeout_s * 1e9)), idle_(urls.size()), events_(kMaxEvents) {
  for (size_t i = 0; i < urls.size(); ++i) {
    const HttpUrl& url = urls[i];
    Endpoint e;
    std::string error;
    if (!resolve_server_address(url.host, url.port, e.server, error)) throw RuntimeFailure(error);
    e.head_prefix = "POST " + url.path + " HTTP/1.1\r\nHost: " + e.server.authority() +
                    "\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n";
    if (i < api_keys.size() && !api_keys[i].empty())
      e.head_prefix += "Authorization: Bearer " + api_keys[i] + "\r\n";
    endpoints_.push_back(std::move(e));
  }
  arena_.reserve(1 << 20);
}

StreamClient::~StreamClient() = default;

StreamClient::Connection* StreamClient::open_connection(int target, int& error) {
  auto c = std::make_unique<Connection>();
  error = c->http.connect(endpoints_[size_t(target)].server.socket);
  if (error != 0) return nullptr;
  c->id = next_id_++;
  c->target = target;
  c->http.watch(epoll_, c->id);
  Connection* raw = c.get();
  connections_[raw->id] = std::move(c);
  return raw;
}

void StreamClient::start(StreamRequest request) {
  auto exchange = std::make_unique<Exchange>();
  const Endpoint& e = endpoints_.at(size_t(request.target));
  // X-Request-Id (as AIPerf sends it) lets a server's logs be matched with records.jsonl.
  exchange->wire = e.head_prefix + "X-Request-Id: " + std::to_string(request.target) + "-" +
                   std::to_string(request.request_id) +
                   "\r\nContent-Length: " + std::to_string(request.body.size()) + "\r\n\r\n" +
                   request.body;
  request.body.clear();
  RequestRecord& r = exchange->record;
  r.target = request.target;
  r.model = request.model;
  r.request_id = request.request_id;
  r.warmup = request.warmup;
  r.scheduled_ns = request.scheduled_ns;
  r.input_tokens = request.input_tokens;
  r.requested_input_tokens = request.input_tokens;
  r.requested_output_tokens = request.requested_output_tokens;
  r.event_ns.reserve(size_t(std::max<int64_t>(1, request.requested_output_tokens)) + 1);
  exchange->request = std::move(request);
  exchange->deadline_ns = monotonic_ns() + timeout_ns_;
  next_deadline_ns_ = std::min(next_deadline_ns_, exchange->deadline_ns);
  ++active_;

  int target = exchange->request.target;
  Connection* c = nullptr;
  while (!idle_[size_t(target)].empty() && !c) {
    uint64_t id = idle_[size_t(target)].back();
    idle_[size_t(target)].pop_back();
    if (auto it = connections_.find(id); it != connections_.end()) c = it->second.get();
  }
  int error = 0;
  if (c) {
    c->reused = true;
  } else {
    c = open_connection(target, error);
  }
  if (!c) {
    // Nothing to wait for: record the failure now (the next poll() hands it back).
    finish(std::move(exchange), RequestStatus::kConnectionError, connect_error(target, error),
           monotonic_ns(), failed_at_start_);
    return;
  }
  attach(*c, std::move(exchange));
}

std::string StreamClient::connect_error(int target, int error) const {
  return connect_failure(endpoints_[size_t(target)].server, error);
}

void StreamClient::attach(Connection& c, std::unique_ptr<Exchange> exchange) {
  c.exchange = std::move(exchange);
  c.sse = SseParser();
  // A write error shows up again as a read error/EOF, where it is recorded.
  c.http.send_request(c.exchange->wire);
  note_sent(c);
}

void StreamClient::on_writable(Connection& c) {
  // A failed connect is reported by the read path (EPOLLERR comes with it).
  c.http.on_writable();
  note_sent(c);
}

void StreamClient::note_sent(Connection& c) {
  if (!c.exchange || c.exchange->record.sent_ns != 0) return;
  if (c.http.connecting() || c.http.connect_failed() || c.http.sending()) return;
  c.exchange->record.sent_ns = monotonic_ns();
}

void StreamClient::poll(int64_t wake_at_ns, std::vector<RequestRecord>& finished) {
  if (!failed_at_start_.empty()) {
    for (RequestRecord& r : failed_at_start_) finished.push_back(std::move(r));
    failed_at_start_.clear();
    wake_at_ns = 0;  // don't sit on results: just look for ready sockets
  }
  wait(std::min(wake_at_ns, next_deadline_ns_));

  // Pass 1: read every ready socket and stamp each read, before any parsing.
  arena_.clear();
  arrivals_.clear();
  for (int i = 0; i < ready_; ++i) {
    auto it = connections_.find(events_[size_t(i)].data.u64);
    if (it == connections_.end()) continue;
    Connection& c = *it->second;
    uint32_t ev = events_[size_t(i)].events;
    if (c.http.connecting() && !(ev & (EPOLLERR | EPOLLHUP))) continue;  // handled in pass 2
    if (!(ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) continue;
    size_t offset = arena_.size();
    arena_.resize(offset + kReadSize);
    HttpClientConnection::Received read = c.http.receive(arena_.data() + offset, kReadSize);
    int64_t now = monotonic_ns();
    if (read.kind == HttpClientConnection::Received::Kind::kBytes) {
      arena_.resize(offset + read.bytes);
      arrivals_.push_back({c.id, offset, read.bytes, now});
      continue;
    }
    arena_.resize(offset);
    if (read.kind == HttpClientConnection::Received::Kind::kNothing) continue;
    c.closed_in_batch = true;
    c.close_error = read.error;
    c.close_ns = now;
  }

  // Pass 2: writes, then the bytes in arrival order, then closes.
  for (int i = 0; i < ready_; ++i) {
    if (!(events_[size_t(i)].events & EPOLLOUT)) continue;
    auto it = connections_.find(events_[size_t(i)].data.u64);
    if (it != connections_.end() && !it->second->closed_in_batch) on_writable(*it->second);
  }
  for (const Arrival& a : arrivals_) {
    auto it = connections_.find(a.connection);
    if (it == connections_.end()) continue;
    on_bytes(*it->second, std::string_view(arena_).substr(a.offset, a.size), a.ns, finished);
  }
  for (int i = 0; i < ready_; ++i) {
    auto it = connections_.find(events_[size_t(i)].data.u64);
    if (it == connections_.end() || !it->second->closed_in_batch) continue;
    Connection& c = *it->second;
    on_closed(c, c.close_error, c.close_ns, finished);
  }
  expire_timeouts(monotonic_ns(), finished);
}

void StreamClient::wait(int64_t until_ns) {
  ready_ = epoll_.wait(events_, std::max<int64_t>(0, until_ns - monotonic_ns()));
  if (ready_ < 0) ready_ = 0;
}

void StreamClient::on_bytes(Connection& c, std::string_view bytes, int64_t ns,
                            std::vector<RequestRecord>& out) {
  if (!c.exchange) {  // an idle connection should stay silent: anything else ends it
    close_connection(c);
    return;
  }
  Exchange& x = *c.exchange;
  c.body.clear();
  HttpClientConnection::ReplyStep step = c.http.take(bytes, c.body);
  const HttpParser& parser = c.http.parser();
  if (step == HttpClientConnection::ReplyStep::kMalformed) {
    finish(std::move(c.exchange), RequestStatus::kStreamError,
           "malformed HTTP response: " + std::string(parser.error_text()), ns, out);
    close_connection(c);
    return;
  }
  if (!x.head_checked && parser.head_complete()) {
    x.head_checked = true;
    const HttpHead& head = parser.head();
    x.record.http_status = head.status;
    x.event_stream =
        head.status == 200 && head.header("content-type").substr(0, 17) == "text/event-stream";
  }
  if (!c.body.empty()) {
    if (x.event_stream) {
      c.messages.clear();
      c.sse.feed(c.body, ns, c.messages);
      for (const SseMessage& m : c.messages) {
        StreamEvent e = interpret_stream_message(m);
        if (e.error) {
          finish(std::move(c.exchange), RequestStatus::kStreamError, "error event: " + *e.error, ns,
                 out);
          close_connection(c);
          return;
        }
        if (x.done_seen) continue;  // nothing after [DONE] counts
        if (e.content) x.record.event_ns.push_back(m.first_byte_ns);
        if (e.prompt_tokens) x.usage_prompt = e.prompt_tokens;
        if (e.completion_tokens) x.usage_completion = e.completion_tokens;
        if (e.finish_reason) x.record.finish_reason = std::move(*e.finish_reason);
        if (e.done) x.done_seen = true;
      }
    } else if (x.error_body.size() < kMaxErrorBody) {
      x.error_body.append(c.body.substr(0, kMaxErrorBody - x.error_body.size()));
    }
  }
  if (step == HttpClientConnection::ReplyStep::kComplete) {
    on_message_complete(c, ns, c.http.reusable(), out);
  }
}

void StreamClient::on_message_complete(Connection& c, int64_t ns, bool reusable,
                                       std::vector<RequestRecord>& out) {
  Exchange& x = *c.exchange;
  const HttpHead& head = c.http.parser().head();
  if (head.status != 200) {
    finish(std::move(c.exchange), RequestStatus::kHttpError,
           error_from_body(head.status, x.error_body), ns, out);
  } else if (!x.event_stream) {
    finish(std::move(c.exchange), RequestStatus::kStreamError,
           "expected a text/event-stream reply, got '" + std::string(head.header("content-type")) +
               "': " + x.error_body.substr(0, 200),
           ns, out);
  } else if (!x.done_seen) {
    finish(std::move(c.exchange), RequestStatus::kStreamError,
           "stream ended without [DONE] after " + std::to_string(x.record.event_ns.size()) +
               " content events",
           ns, out);
  } else if (x.record.event_ns.empty()) {
    finish(std::move(c.exchange), RequestStatus::kStreamError, "stream had no content events", ns,
           out);
  } else {
    finish(std::move(c.exchange), RequestStatus::kOk, "", ns, out);
  }
  if (reusable) {
    make_idle(c);
  } else {
    close_connection(c);
  }
}

void StreamClient::on_closed(Connection& c, int error, int64_t ns,
                             std::vector<RequestRecord>& out) {
  if (!c.exchange) {  // an idle connection the server closed
    close_connection(c);
    return;
  }
  Exchange& x = *c.exchange;
  if (c.http.end_of_input(error) == HttpClientConnection::ReplyStep::kComplete) {
    on_message_complete(c, ns, false, out);  // a reply framed by the connection's end
    return;
  }
  if (c.reused && !c.http.reply_started() && !x.retried) {
    // The server closed an idle keep-alive connection as we reused it: it never saw this
    // request. Send it again on a fresh connection.
    std::unique_ptr<Exchange> again = std::move(c.exchange);
    again->retried = true;
    again->record.sent_ns = 0;
    int target = c.target;
    close_connection(c);
    int connect_errno = 0;
    if (Connection* fresh = open_connection(target, connect_errno)) {
      attach(*fresh, std::move(again));
      return;
    }
    finish(std::move(again), RequestStatus::kConnectionError, connect_error(target, connect_errno),
           ns, out);
    return;
  }
  std::string what = error ? describe_errno(error) : "connection closed by the server";
  if (!x.record.sent_ns) {
    what = error ? connect_error(c.target, error) : what + " before the request was sent";
  } else if (!x.head_checked) {
    what += " before any reply";
  } else {
    what += " mid-response after " + std::to_string(x.record.event_ns.size()) + " content events";
  }
  finish(std::move(c.exchange), RequestStatus::kConnectionError, what, ns, out);
  close_connection(c);
}

void StreamClient::finish(std::unique_ptr<Exchange> x, RequestStatus status, std::string error,
                          int64_t end_ns, std::vector<RequestRecord>& out) {
  RequestRecord& r = x->record;
  r.status = status;
  r.error = std::move(error);
  r.end_ns = end_ns;
  if (!r.event_ns.empty()) {
    r.first_ns = r.event_ns.front();
    r.last_ns = r.event_ns.back();
  }
  if (x->usage_prompt) r.input_tokens = *x->usage_prompt;
  r.output_tokens_from_usage = x->usage_completion.has_value();
  r.output_tokens = x->usage_completion ? *x->usage_completion : int64_t(r.event_ns.size());
  out.push_back(std::move(r));
  --active_;
}

void StreamClient::expire_timeouts(int64_t now, std::vector<RequestRecord>& out) {
  if (now < next_deadline_ns_) return;
  next_deadline_ns_ = INT64_MAX;
  std::vector<Connection*> expired;
  for (auto& [id, c] : connections_) {
    if (!c->exchange) continue;
    if (c->exchange->deadline_ns <= now) {
      expired.push_back(c.get());
    } else {
      next_deadline_ns_ = std::min(next_deadline_ns_, c->exchange->deadline_ns);
    }
  }
  for (Connection* c : expired) {
    const RequestRecord& r = c->exchange->record;
    std::string stage = !r.sent_ns ? "while connecting or sending"
                        : !c->exchange->head_checked
                            ? "before any reply"
                            : "after " + std::to_string(r.event_ns.size()) + " content events";
    finish(std::move(c->exchange), RequestStatus::kTimeout,
           "no complete response within " + std::to_string(timeout_ns_ / 1'000'000) + " ms (" +
               stage + ")",
           now, out);
    close_connection(*c);
  }
}

void StreamClient::make_idle(Connection& c) {
  c.reused = false;
  idle_[size_t(c.target)].push_back(c.id);
}

void StreamClient::close_connection(Connection& c) {
  auto& idle = idle_[size_t(c.target)];
  idle.erase(std::remove(idle.begin(), idle.end(), c.id), idle.end());
  connections_.erase(c.id);  // destroys c, which closes its socket
}

}  // namespace gpufrac
