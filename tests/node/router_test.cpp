// The router against in-process upstream engines: routing by "model", 404/503/400 with OpenAI
// bodies, streams passed through as they arrive, client disconnect closing the upstream request,
// replica balancing, engine-name rewriting, draining, upstreams reached by host name and over IPv6.
#include "node/engine_port.h"
#include "node/router.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "common/clock.h"
#include "common/http_client.h"
#include "common/json.h"
#include "common/raw_http_exchange.h"
#include "node_test_util.h"
#include "router_test_util.h"

namespace gpufrac {
namespace {

using testing::eventually;
using testing::ready_at;
using testing::stream_request;

// An engine stand-in listening on `host`: streams `chunks` SSE events `gap_ms` apart, or answers
// JSON when the body has "stream": false; echoes the model it was asked for; notes disconnects.
class FakeUpstream {
 public:
  explicit FakeUpstream(int chunks = 3, int gap_ms = 100, std::string host = "127.0.0.1")
      : chunks_(chunks), gap_ms_(gap_ms), server_(HttpServerOptions{std::move(host)}) {
    server_.route("POST", "/v1/completions", [this](const HttpRequest& q, std::shared_ptr<HttpResponse> r) {
      requests_++;
      Json body = Json::parse(q.body);
      std::string model = body.value("model", "");
      if (!body.value("stream", true)) {
        r->send(body.value("status", 200), "application/json", Json{{"model", model}, {"text", "hi"}}.dump());
        return;
      }
      r->on_disconnect([this] { disconnects_++; });
      r->start_stream(200, "text/event-stream");
      active_++;
      std::thread([this, r, model] {
        for (int i = 0; i < chunks_; ++i) {
          if (i) std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms_));
          if (!r->write("data: {\"model\":\"" + model + "\",\"i\":" + std::to_string(i) + "}\n\n")) break;
        }
        r->write("data: [DONE]\n\n");
        r->end();
        active_--;
      }).detach();
    });
    server_.route("POST", "/tokenize", [](const HttpRequest& q, std::shared_ptr<HttpResponse> r) {
      r->send(200, "application/json", Json{{"model", Json::parse(q.body).value("model", "")}, {"count", 2}}.dump());
    });
    server_.start();
  }
  ~FakeUpstream() {
    server_.stop();
    eventually([&] { return active_ == 0; }, 5);
  }
  int port() const { return server_.port(); }
  std::atomic<int> requests_{0}, disconnects_{0}, active_{0};

 private:
  int chunks_, gap_ms_;
  HttpServer server_;
};

std::string url(const Router& r, const std::string& path) {
  return "http://127.0.0.1:" + std::to_string(r.port()) + path;
}

TEST(Router, RoutesByModelAndStreamsAsItArrives) {
  FakeUpstream a(5, 150), b;
  Router router({}, {{"a", 1}, {"b", 1}});
  router.set_replica("a", 0, ready_at(a.port()));
  router.set_replica("b", 0, ready_at(b.port()));
  router.start();
  auto result = stream_request(router.port(), "/v1/completions", R"({"model":"a","prompt":"x"})");
  ASSERT_TRUE(result.complete) << result.error;
  EXPECT_EQ(result.status, 200);
  EXPECT_EQ(result.content_type, "text/event-stream");
  EXPECT_NE(result.body.find("\"i\":4"), std::string::npos);
  EXPECT_NE(result.body.find("[DONE]"), std::string::npos);
  EXPECT_EQ(a.requests_, 1);
  EXPECT_EQ(b.requests_, 0);
  // Five chunks 150 ms apart arrive as separate reads spread over >= 0.45 s: passed through one by
  // one, not buffered until the end.
  ASSERT_GE(result.arrival_ns.size(), 4u);
  EXPECT_GT(result.arrival_ns.back() - result.arrival_ns.front(), 450'000'000);
  EXPECT_TRUE(router.wait_idle(2));
}

TEST(Router, ChatCompletionsAndJsonRepliesKeepTheirStatus) {
  FakeUpstream a;
  Router router({}, {{"a", 1}});
  router.set_replica("a", 0, ready_at(a.port()));
  router.start();
  HttpReply ok = http_post_json(url(router, "/v1/completions"), R"({"model":"a","stream":false})");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(Json::parse(ok.body)["text"], "hi");
  HttpReply bad = http_post_json(url(router, "/v1/completions"), R"({"model":"a","stream":false,"status":422})");
  EXPECT_EQ(bad.status, 422);
  HttpReply chat = http_post_json(url(router, "/v1/chat/completions"), R"({"model":"a","stream":false})");
  EXPECT_EQ(chat.status, 404);  // the fake serves only /v1/completions: its own 404 passes through
}

TEST(Router, TokenizeGoesToTheNamedModel) {
  FakeUpstream a, b;
  Router router({}, {{"a", 1}, {"b", 1}});
  router.set_replica("a", 0, ready_at(a.port()));
  router.set_replica("b", 0, ready_at(b.port()));
  router.start();
  HttpReply reply = http_post_json(url(router, "/tokenize"), R"({"model":"b","prompt":"hi"})");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(Json::parse(reply.body)["model"], "b");
  EXPECT_EQ(http_post_json(url(router, "/detokenize"), R"({"model":"zzz"})").status, 404);
}

TEST(Router, UnknownModelIs404NotReadyIs503BadBodyIs400) {
  FakeUpstream a;
  Router router({}, {{"a", 1}, {"b", 1, false, /*restart_wait_s=*/0}});  // b: no waiting
  router.set_replica("a", 0, ready_at(a.port()));
  ReplicaState restarting;
  restarting.state = "restarting";
  router.set_replica("b", 0, restarting);
  router.start();

  HttpReply unknown = http_post_json(url(router, "/v1/completions"), R"({"model":"zzz"})");
  EXPECT_EQ(unknown.status, 404);
  Json error = Json::parse(unknown.body)["error"];
  EXPECT_EQ(error["code"], "model_not_found");
  EXPECT_EQ(error["param"], "model");
  EXPECT_NE(error["message"].get<std::string>().find("zzz"), std::string::npos);

  HttpReply not_ready = http_post_json(url(router, "/v1/chat/completions"), R"({"model":"b"})");
  EXPECT_EQ(not_ready.status, 503);
  error = Json::parse(not_ready.body)["error"];
  EXPECT_EQ(error["code"], "model_not_ready");
  EXPECT_EQ(error["type"], "service_unavailable");
  EXPECT_NE(error["message"].get<std::string>().find("restarting"), std::string::npos);

  for (const char* body : {"not json", "[1,2]", R"({"prompt":"x"})", R"({"model":7})"}) {
    HttpReply reply = http_post_json(url(router, "/v1/completions"), body);
    EXPECT_EQ(reply.status, 400) << body;
    EXPECT_TRUE(Json::parse(reply.body).contains("error")) << reply.body;
  }
  EXPECT_EQ(a.requests_, 0);
}

TEST(Router, AReadyReplicaThatRefusesConnectionsIs503AfterTheWait) {
  // Bound, never listening: connections are refused, and no other test's server can take the
  // port meanwhile (a port freed at once could be handed to the next bind of port 0).
  EnginePortReservation refusing = reserve_engine_port();
  const int closed_port = refusing.port();
  Router router({}, {{"a", 1, false, /*restart_wait_s=*/0.3}});
  router.set_replica("a", 0, ready_at(closed_port));
  router.start();
  int64_t start = monotonic_ns();
  HttpReply reply = http_post_json(url(router, "/v1/completions"), R"({"model":"a"})");
  EXPECT_GE(monotonic_ns() - start, 300'000'000) << "it was answered before its wait ended";
  EXPECT_EQ(reply.status, 503);
  EXPECT_EQ(Json::parse(reply.body)["error"]["code"], "model_not_ready") << reply.body;
  EXPECT_NE(reply.body.find("failed a moment ago"), std::string::npos) << reply.body;
  EXPECT_TRUE(router.wait_idle(2));
}

TEST(Router, ClientDisconnectClosesTheUpstreamRequest) {
  FakeUpstream a(50, 100);  // a 5 s stream
  Router router({}, {{"a", 1}});
  router.set_replica("a", 0, ready_at(a.port()));
  router.start();
  auto partial = stream_request(router.port(), "/v1/completions", R"({"model":"a"})", 10, "data:");
  EXPECT_FALSE(partial.complete);
  EXPECT_TRUE(eventually([&] { return a.disconnects_ == 1; }, 3)) << "upstream never saw the hang-up";
  EXPECT_TRUE(router.wait_idle(3));
}

TEST(Router, ModelsAndHealthShowReadiness) {
  FakeUpstream a;
  Router router({}, {{"a", 1}, {"b", 2}});
  router.set_replica("a", 0, ready_at(a.port()));
  router.start();
  Json models = Json::parse(http_get(url(router, "/v1/models")).body);
  ASSERT_EQ(models["data"].size(), 2u);
  EXPECT_EQ(models["data"][0]["id"], "a");
  EXPECT_EQ(models["data"][0]["ready"], true);
  EXPECT_EQ(models["data"][1]["id"], "b");
  EXPECT_EQ(models["data"][1]["ready"], false);
  EXPECT_EQ(models["data"][1]["replicas"], 2);
  EXPECT_EQ(http_get(url(router, "/health")).status, 503);
  router.set_replica("b", 1, ready_at(a.port()));
  EXPECT_EQ(http_get(url(router, "/health")).status, 200);
}

TEST(Router, BalancesReplicasAndRewritesTheEngineName) {
  FakeUpstream r0(10, 100), r1(10, 100);
  Router router({}, {{"m", 2}});
  router.set_replica("m", 0, ready_at(r0.port(), "engine-name"));
  router.set_replica("m", 1, ready_at(r1.port(), "engine-name"));
  router.start();
  std::thread first([&] { stream_request(router.port(), "/v1/completions", R"({"model":"m"})"); });
  ASSERT_TRUE(eventually([&] { return r0.requests_ + r1.requests_ == 1; }, 3));
  auto second = stream_request(router.port(), "/v1/completions", R"({"model":"m"})");
  first.join();
  EXPECT_EQ(r0.requests_, 1);
  EXPECT_EQ(r1.requests_, 1);
  EXPECT_NE(second.body.find("\"model\":\"engine-name\""), std::string::npos) << second.body;
}

TEST(Router, DrainRefusesNewRequestsAndWaitsForInFlight) {
  FakeUpstream a(5, 100);
  Router router({}, {{"a", 1}});
  router.set_replica("a", 0, ready_at(a.port()));
  router.start();
  testing::RawReply in_flight;
  std::thread stream([&] { in_flight = stream_request(router.port(), "/v1/completions", R"({"model":"a"})"); });
  ASSERT_TRUE(eventually([&] { return router.in_flight() == 1; }, 3));
  router.begin_drain();
  HttpReply refused = http_post_json(url(router, "/v1/completions"), R"({"model":"a"})");
  EXPECT_EQ(refused.status, 503);
  EXPECT_NE(refused.body.find("node_draining"), std::string::npos);
  EXPECT_TRUE(router.wait_idle(5));
  stream.join();
  EXPECT_TRUE(in_flight.complete) << in_flight.error;
}

// Routes one streamed and one JSON request for model "m" to an upstream on `host`.
void expect_reached_on(const std::string& host) {
  FakeUpstream upstream(3, 10, host);
  Router router({}, {{"m", 1}});
  router.set_replica("m", 0, ready_at(upstream.port(), "", host));
  router.start();
  auto streamed = stream_request(router.port(), "/v1/completions", R"({"model":"m"})");
  ASSERT_TRUE(streamed.complete) << host << ": " << streamed.error;
  EXPECT_NE(streamed.body.find("\"i\":2"), std::string::npos) << streamed.body;
  EXPECT_NE(streamed.body.find("[DONE]"), std::string::npos) << streamed.body;
  HttpReply json = http_post_json(url(router, "/v1/completions"), R"({"model":"m","stream":false})");
  ASSERT_EQ(json.status, 200) << host << ": " << json.body;
  EXPECT_EQ(Json::parse(json.body)["model"], "m");
  EXPECT_EQ(upstream.requests_, 2);
  EXPECT_TRUE(router.wait_idle(2));
}

TEST(Router, ReachesAnUpstreamByHostName) { expect_reached_on("localhost"); }

TEST(Router, ReachesAnUpstreamOverIpv6) {
  if (!testing::ipv6_loopback_available()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  expect_reached_on("::1");
}

TEST(Router, AReplicaWhoseHostDoesNotResolveIsNotReady) {
  Router router({}, {{"a", 1, false, /*restart_wait_s=*/0}});
  router.set_replica("a", 0, ready_at(8000, "", "no-such-host.invalid"));
  router.start();
  HttpReply reply = http_post_json(url(router, "/v1/completions"), R"({"model":"a"})");
  EXPECT_EQ(reply.status, 503);
  EXPECT_EQ(Json::parse(reply.body)["error"]["code"], "model_not_ready");
  EXPECT_NE(reply.body.find("cannot resolve no-such-host.invalid"), std::string::npos) << reply.body;
  EXPECT_EQ(http_get(url(router, "/health")).status, 503);
}

}  // namespace
}  // namespace gpufrac
