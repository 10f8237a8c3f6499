// UpstreamProxy's results: how each relay ended and whether the client saw any of the engine's
// reply (ProxyResult), for a whole stream, a JSON reply, a stream cut after its head, a reply cut
// before its head (502), and a refused connect (503). The engine is an in-process HttpServer whose
// handlers misbehave on purpose; a front HttpServer relays POST /relay/<path> to its <path>.
#include "node/upstream_proxy.h"

#include <gtest/gtest.h>

#include <mutex>
#include <optional>

#include "common/json.h"
#include "common/raw_http_exchange.h"
#include "node_test_util.h"

namespace gpufrac {
namespace {

using testing::eventually;
using testing::stream_request;

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

// Relays POST /relay/<path> to <path> on `upstream_port` and keeps the last ProxyResult.
class Relay {
 public:
  explicit Relay(int upstream_port) : server_({}) {
    std::string error;
    EXPECT_TRUE(resolve_server_address("127.0.0.1", upstream_port, upstream_, error)) << error;
    server_.route(
        "POST", "/relay/*", [this](const HttpRequest& q, std::shared_ptr<HttpResponse> r) {
          ProxyRequest request;
          request.upstream = upstream_;
          request.target = q.head.target.substr(std::string("/relay").size());
          request.body = q.body;
          request.model = "m";
          proxy_.forward(std::move(request), std::move(r), [this](const ProxyResult& result) {
            std::lock_guard lock(mutex_);
            result_ = result;
          });
        });
    server_.start();
  }
  // POSTs to /relay/<path>; returns the client's view and the proxy's result.
  std::pair<testing::RawReply, ProxyResult> relay(const std::string& path) {
    {
      std::lock_guard lock(mutex_);
      result_.reset();
    }
    testing::RawReply reply = stream_request(server_.port(), "/relay" + path, "{}", 5);
    EXPECT_TRUE(eventually(
        [&] {
          std::lock_guard lock(mutex_);
          return result_.has_value();
        },
        3))
        << path << ": no result";
    std::lock_guard lock(mutex_);
    return {reply, result_.value_or(ProxyResult{})};
  }

 private:
  ServerAddress upstream_;
  std::mutex mutex_;  // before proxy_: its last callbacks may run as it goes
  std::optional<ProxyResult> result_;
  UpstreamProxy proxy_;  // before server_: the server (and its callbacks) goes first
  HttpServer server_;
};

TEST(UpstreamProxy, CompletedRepliesWereRelayed) {
  MisbehavingEngine engine;
  Relay relay(engine.port());
  auto [stream, streamed] = relay.relay("/stream");
  EXPECT_TRUE(stream.complete) << stream.error;
  EXPECT_EQ(stream.body, "data: 1\n\n");
  EXPECT_EQ(streamed.outcome, ProxyOutcome::kCompleted);
  EXPECT_TRUE(streamed.reply_relayed);
  auto [json, sent] = relay.relay("/json");
  EXPECT_EQ(json.status, 422);
  EXPECT_EQ(sent.outcome, ProxyOutcome::kCompleted);
  EXPECT_TRUE(sent.reply_relayed);
}

TEST(UpstreamProxy, AStreamCutAfterItsHeadIsAbortedAfterBeingRelayed) {
  MisbehavingEngine engine;
  Relay relay(engine.port());
  auto [reply, result] = relay.relay("/cut-stream");
  EXPECT_FALSE(reply.complete);  // no false end of stream
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(result.outcome, ProxyOutcome::kFailed);
  EXPECT_TRUE(result.reply_relayed);
}

TEST(UpstreamProxy, AReplyCutBeforeItsHeadIs502AndNothingRelayed) {
  MisbehavingEngine engine;
  Relay relay(engine.port());
  auto [reply, result] = relay.relay("/cut-before-head");
  EXPECT_EQ(reply.status, 502);
  EXPECT_NE(reply.body.find("closed the connection"), std::string::npos) << reply.body;
  EXPECT_EQ(result.outcome, ProxyOutcome::kFailed);
  EXPECT_FALSE(result.reply_relayed);
}

TEST(UpstreamProxy, ARefusedConnectIs503AndNothingRelayed) {
  Relay relay(testing::free_port());
  auto [reply, result] = relay.relay("/stream");
  EXPECT_EQ(reply.status, 503);
  EXPECT_EQ(Json::parse(reply.body)["error"]["type"], "service_unavailable") << reply.body;
  EXPECT_EQ(result.outcome, ProxyOutcome::kRefused);
  EXPECT_FALSE(result.reply_relayed);
}

}  // namespace
}  // namespace gpufrac
