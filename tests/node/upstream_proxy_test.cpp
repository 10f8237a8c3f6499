// UpstreamProxy's results: what its handler is given and how each exchange ended (ProxyResult),
// for a whole stream, a JSON reply, a stream cut after its head, a reply cut before its head, a
// refused connect and a handler that stops reading. The engine is an in-process HttpServer whose
// handlers misbehave on purpose.
#include "node/upstream_proxy.h"

#include <gtest/gtest.h>

#include <mutex>
#include <optional>

#include "common/http_server.h"
#include "common/json.h"
#include "common/raw_http_exchange.h"
#include "node_test_util.h"

namespace gpufrac {
namespace {

using testing::eventually;

class MisbehavingEngine {
 public:
  MisbehavingEngine() : server_({}) {
    server_.route("POST", "/stream", [](const HttpRequest&, std::shared_ptr<HttpResponse> r) {
      r->start_stream(200, "text/event-stream");
      r->write("data: 1\n\n");
      r->end();
    });
    server_.route("POST", "/json", [](const HttpRequest&, std::shared_ptr<HttpResponse> r) {
      r->send(422, "application/json", R"({"error":"no"})");
    });
    server_.route("POST", "/cut-stream", [](const HttpRequest&, std::shared_ptr<HttpResponse> r) {
      r->start_stream(200, "text/event-stream");
      r->write("data: 1\n\n");
      r->abort();
    });
    server_.route("POST", "/cut-before-head",
                  [](const HttpRequest&, std::shared_ptr<HttpResponse> r) { r->abort(); });
    server_.start();
  }
  int port() const { return server_.port(); }

 private:
  HttpServer server_;
};

// Forwards POST <path> to `upstream_port` and records what its handler was given.
class Recorder : public ProxyReplyHandler {
 public:
  void on_reply_head(const HttpHead& head) override {
    std::lock_guard lock(mutex_);
    status_ = head.status;
  }
  bool on_reply_body(std::string_view bytes) override {
    std::lock_guard lock(mutex_);
    body_.append(bytes);
    return keep_reading_;
  }
  void on_end(const ProxyResult& result) override {
    std::lock_guard lock(mutex_);
    result_ = result;
  }
  // Waits for on_end.
  ProxyResult result() {
    EXPECT_TRUE(eventually(
        [&] {
          std::lock_guard lock(mutex_);
          return result_.has_value();
        },
        3));
    std::lock_guard lock(mutex_);
    return result_.value_or(ProxyResult{});
  }
  int status() {
    std::lock_guard lock(mutex_);
    return status_;
  }
  std::string body() {
    std::lock_guard lock(mutex_);
    return body_;
  }
  bool keep_reading_ = true;

 private:
  std::mutex mutex_;
  int status_ = 0;
  std::string body_;
  std::optional<ProxyResult> result_;
};

std::shared_ptr<Recorder> forward(UpstreamProxy& proxy, int port, const std::string& path,
                                  bool keep_reading = true) {
  ProxyRequest request;
  std::string error;
  EXPECT_TRUE(resolve_server_address("127.0.0.1", port, request.upstream, error)) << error;
  request.target = path;
  request.body = "{}";
  auto recorder = std::make_shared<Recorder>();
  recorder->keep_reading_ = keep_reading;
  proxy.forward(std::move(request), recorder);
  return recorder;
}

TEST(UpstreamProxy, CompletedRepliesAreHandedOverWhole) {
  MisbehavingEngine engine;
  UpstreamProxy proxy;
  auto stream = forward(proxy, engine.port(), "/stream");
  EXPECT_EQ(stream->result().outcome, ProxyOutcome::kCompleted);
  EXPECT_EQ(stream->status(), 200);
  EXPECT_EQ(stream->body(), "data: 1\n\n");
  auto json = forward(proxy, engine.port(), "/json");
  ProxyResult sent = json->result();
  EXPECT_EQ(sent.outcome, ProxyOutcome::kCompleted);
  EXPECT_TRUE(sent.reply_started);
  EXPECT_EQ(json->status(), 422);
  EXPECT_EQ(json->body(), R"({"error":"no"})");
}

TEST(UpstreamProxy, AStreamCutAfterItsHeadFailsAfterItsFirstBytes) {
  MisbehavingEngine engine;
  UpstreamProxy proxy;
  auto cut = forward(proxy, engine.port(), "/cut-stream");
  ProxyResult result = cut->result();
  EXPECT_EQ(result.outcome, ProxyOutcome::kFailed);
  EXPECT_TRUE(result.reply_started);
  EXPECT_NE(result.error.find("closed the connection"), std::string::npos) << result.error;
  EXPECT_EQ(cut->body(), "data: 1\n\n");
}

TEST(UpstreamProxy, AReplyCutBeforeItsHeadFailsWithNothingStarted) {
  MisbehavingEngine engine;
  UpstreamProxy proxy;
  ProxyResult result = forward(proxy, engine.port(), "/cut-before-head")->result();
  EXPECT_EQ(result.outcome, ProxyOutcome::kFailed);
  EXPECT_FALSE(result.reply_started);
}

TEST(UpstreamProxy, ARefusedConnectSaysSo) {
  UpstreamProxy proxy;
  ProxyResult result = forward(proxy, testing::free_port(), "/stream")->result();
  EXPECT_EQ(result.outcome, ProxyOutcome::kRefused);
  EXPECT_FALSE(result.reply_started);
  EXPECT_NE(result.error.find("cannot connect"), std::string::npos) << result.error;
}

TEST(UpstreamProxy, AHandlerThatStopsReadingCancelsTheExchange) {
  MisbehavingEngine engine;
  UpstreamProxy proxy;
  ProxyResult result = forward(proxy, engine.port(), "/stream", false)->result();
  EXPECT_EQ(result.outcome, ProxyOutcome::kCancelled);
}

}  // namespace
}  // namespace gpufrac
