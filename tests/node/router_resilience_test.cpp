// The router when engines die: requests held while a model has no ready replica (in order, up to
// restart_wait and queue_limit, then 503 with Retry-After), requests retried when their engine
// failed before any reply reached the client, streams of a resumable engine resumed (on another
// replica or the same one back) and spliced into one client stream, third-party streams cut, a
// failed model answered at once, the resend limit, and the counters on GET /metrics.
// TokenEngine stands in for the built-in engine and fails on request.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "common/clock.h"
#include "common/http_client.h"
#include "common/json.h"
#include "common/raw_http_exchange.h"
#include "node/router.h"
#include "node_test_util.h"
#include "router_test_util.h"

namespace gpufrac {
namespace {

using testing::eventually;
using testing::ready_at;
using testing::stream_request;

constexpr int kFirstToken = 1000;  // token i of every run is kFirstToken + i

enum class Fault { kNone, kCut, kCutBeforeHead, kErrorEvent, kEarlyDone, kAnswer503 };

// The built-in engine's /v1/completions as far as the router sees it: streams max_tokens chunks
// {"id", "created", "choices": [{"text", "token_ids", "finish_reason"}], "usage": null}, 10 ms
// apart, then a usage chunk and [DONE]; or one JSON body when "stream" is false. It honours
// resume_token_ids: the run continues after them and usage counts the whole run. Faults are
// armed for the next request(s): cut (the connection aborted after `after` tokens, as a killed
// engine's), an error event or an early [DONE] after `after` tokens, a 503, a cut before any reply.
class TokenEngine {
 public:
  TokenEngine() : server_({}) {
    server_.route("POST", "/v1/completions",
                  [this](const HttpRequest& q, std::shared_ptr<HttpResponse> r) { serve(q, r); });
    server_.start();
  }
  ~TokenEngine() {
    server_.stop();
    eventually([&] { return active_ == 0; }, 5);
  }
  void fail(Fault fault, int after = 0, int times = 1) {
    std::lock_guard lock(mutex_);
    fault_ = fault;
    after_ = after;
    times_ = times;
  }
  int port() const { return server_.port(); }
  std::vector<Json> bodies() {
    std::lock_guard lock(mutex_);
    return bodies_;
  }
  std::atomic<int> active_{0};

 private:
  void serve(const HttpRequest& q, std::shared_ptr<HttpResponse> r) {
    Json body = Json::parse(q.body);
    Fault fault = Fault::kNone;
    int after = 0, number = 0;
    {
      std::lock_guard lock(mutex_);
      bodies_.push_back(body);
      number = int(bodies_.size());
      if (times_ > 0) {
        fault = fault_;
        after = after_;
        --times_;
      }
    }
    int max_tokens = body.value("max_tokens", 16);
    int resumed = int(body.value("resume_token_ids", Json::array()).size());
    int prompt = int(body.value("prompt", Json::array()).size());
    Json usage = {{"prompt_tokens", prompt},
                  {"completion_tokens", max_tokens},
                  {"total_tokens", prompt + max_tokens}};
    if (fault == Fault::kCutBeforeHead) return r->abort();
    if (fault == Fault::kAnswer503) return send_openai_error(*r, 503, "the engine is stopping");
    if (!body.value("stream", false)) {
      Json ids = Json::array();
      for (int i = resumed; i < max_tokens; ++i) ids.push_back(kFirstToken + i);
      r->send(200, "application/json",
              Json{{"choices", {{{"text", "x"}, {"token_ids", ids}}}}, {"usage", usage}}.dump());
      return;
    }
    r->start_stream(200, "text/event-stream");
    active_++;
    std::thread([=, this] {
      Json head = {{"id", "cmpl-" + std::to_string(number)}, {"created", number}};
      for (int i = resumed; i < max_tokens; ++i) {
        if (fault != Fault::kNone && i - resumed == after) {
          if (fault == Fault::kCut) {
            r->abort();  // the client sees the connection close mid-stream
          } else {
            if (fault == Fault::kErrorEvent) {
              r->write("data: {\"error\":{\"message\":\"generation failed\"}}\n\n");
            }
            r->write("data: [DONE]\n\n");
            r->end();
          }
          active_--;
          return;
        }
        Json chunk = head;
        chunk["choices"] = {{{"index", 0},
                             {"text", " t"},
                             {"token_ids", {kFirstToken + i}},
                             {"finish_reason", i + 1 == max_tokens ? Json("length") : Json()}}};
        chunk["usage"] = nullptr;
        r->write("data: " + chunk.dump() + "\n\n");
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      Json last = head;
      last["choices"] = Json::array();
      last["usage"] = usage;
      r->write("data: " + last.dump() + "\n\ndata: [DONE]\n\n");
      r->end();
      active_--;
    }).detach();
  }

  HttpServer server_;
  std::mutex mutex_;
  std::vector<Json> bodies_;
  Fault fault_ = Fault::kNone;
  int after_ = 0;
  int times_ = 0;
};

ReplicaState not_ready(const std::string& state, bool failed = false) {
  ReplicaState s;
  s.state = state;
  s.failed = failed;
  return s;
}

std::string stream_body(int max_tokens, int first_prompt_id = 1) {
  return Json{{"model", "m"},
              {"prompt", {first_prompt_id, 2, 3}},
              {"max_tokens", max_tokens},
              {"stream", true},
              {"stream_options", {{"include_usage", true}}}}
      .dump();
}

// What a client made of one stream.
struct ClientStream {
  Json ids = Json::array();
  std::set<std::string> chunk_ids;
  int finishes = 0, dones = 0, errors = 0;
  Json usage;
};
ClientStream read_stream(const testing::RawReply& reply) {
  ClientStream s;
  size_t at = 0;
  while ((at = reply.body.find("data: ", at)) != std::string::npos) {
    size_t end = reply.body.find("\n\n", at);
    std::string data = reply.body.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") {
      s.dones++;
      continue;
    }
    Json chunk = Json::parse(data);
    if (chunk.contains("error")) s.errors++;
    if (chunk.contains("id")) s.chunk_ids.insert(chunk["id"].get<std::string>());
    if (chunk.contains("usage") && chunk["usage"].is_object()) s.usage = chunk["usage"];
    if (!chunk.contains("choices") || chunk["choices"].empty()) continue;
    for (const Json& id : chunk["choices"][0]["token_ids"]) s.ids.push_back(id);
    if (chunk["choices"][0]["finish_reason"].is_string()) s.finishes++;
  }
  return s;
}

// The one uninterrupted run of stream_body(n): one stream id, every token once, one finish, the
// usage of the whole run, one [DONE].
void expect_one_whole_run(const testing::RawReply& reply, int n) {
  ASSERT_TRUE(reply.complete) << reply.error << "\n" << reply.body;
  EXPECT_EQ(reply.status, 200);
  ClientStream s = read_stream(reply);
  Json expected = Json::array();
  for (int i = 0; i < n; ++i) expected.push_back(kFirstToken + i);
  EXPECT_EQ(s.ids, expected) << reply.body;
  EXPECT_EQ(s.chunk_ids.size(), 1u) << reply.body;
  EXPECT_EQ(s.finishes, 1);
  EXPECT_EQ(s.dones, 1);
  EXPECT_EQ(s.errors, 0);
  EXPECT_EQ(s.usage["completion_tokens"], n) << reply.body;
  EXPECT_EQ(s.usage["prompt_tokens"], 3) << reply.body;
}

double metric(const Router& router, const std::string& sample) {
  HttpReply reply = http_get("http://127.0.0.1:" + std::to_string(router.port()) + "/metrics");
  size_t at = reply.body.find(sample + " ");
  return at == std::string::npos ? -1 : std::stod(reply.body.substr(at + sample.size() + 1));
}

RouterModel model(int replicas, bool resumable = true, double wait_s = 30, size_t limit = 256) {
  return {"m", replicas, resumable, wait_s, limit};
}

// Sends stream_body(4, first_prompt_id) from a thread into `reply`; returns once the router
// holds it (`already` requests were waiting before).
std::thread waiting_request(const Router& router, testing::RawReply& reply, int already = 0,
                            int first_prompt_id = 1) {
  std::thread client([&router, &reply, first_prompt_id] {
    reply = stream_request(router.port(), "/v1/completions", stream_body(4, first_prompt_id));
  });
  EXPECT_TRUE(eventually(
      [&] { return metric(router, R"(gpufrac:node_requests_waiting{model="m"})") == already + 1; },
      3));
  return client;
}

TEST(RouterResilience, AStreamCutByItsEngineResumesOnAnotherReplicaAsOneStream) {
  TokenEngine dying, healthy;
  dying.fail(Fault::kCut, 4);
  Router router({}, {model(2)});
  router.set_replica("m", 0, ready_at(dying.port()));
  router.set_replica("m", 1, ready_at(healthy.port()));
  router.start();
  expect_one_whole_run(stream_request(router.port(), "/v1/completions", stream_body(12)), 12);
  ASSERT_EQ(healthy.bodies().size(), 1u);
  EXPECT_EQ(healthy.bodies()[0]["resume_token_ids"], Json({1000, 1001, 1002, 1003}));
  EXPECT_EQ(healthy.bodies()[0]["max_tokens"], 12) << "the engine counts the whole run";
  EXPECT_EQ(metric(router, R"(gpufrac:node_resumed_streams_total{model="m"})"), 1);
  EXPECT_EQ(
      metric(router, R"(gpufrac:node_failed_requests_total{model="m",reason="engine_failed"})"), 0);
  EXPECT_TRUE(router.wait_idle(2));
}

TEST(RouterResilience, ACutStreamWaitsForItsReplicaToComeBackAndResumesThere) {
  TokenEngine engine;
  engine.fail(Fault::kCut, 3);
  Router router({}, {model(1)});
  router.set_replica("m", 0, ready_at(engine.port()));
  router.start();
  testing::RawReply reply;
  std::thread client(
      [&] { reply = stream_request(router.port(), "/v1/completions", stream_body(8)); });
  ASSERT_TRUE(eventually([&] { return engine.bodies().size() == 1 && engine.active_ == 0; }, 3));
  router.set_replica("m", 0, not_ready("restarting"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(engine.bodies().size(), 1u) << "sent while the model was restarting";
  router.set_replica("m", 0, ready_at(engine.port()));
  client.join();
  expect_one_whole_run(reply, 8);
  EXPECT_EQ(engine.bodies().size(), 2u);
}

TEST(RouterResilience, AnErrorEventOrAnEarlyDoneIsResumedLikeACut) {
  TokenEngine engine;
  Router router({}, {model(1)});
  router.set_replica("m", 0, ready_at(engine.port()));
  router.start();
  for (Fault fault : {Fault::kErrorEvent, Fault::kEarlyDone}) {
    engine.fail(fault, 5);
    // The replica that failed is avoided for a moment; the router tries it again after that.
    expect_one_whole_run(stream_request(router.port(), "/v1/completions", stream_body(9)), 9);
  }
  EXPECT_EQ(metric(router, R"(gpufrac:node_resumed_streams_total{model="m"})"), 2);
}

TEST(RouterResilience, ARequestWhoseEngineFailedBeforeReplyingIsRetried) {
  TokenEngine engine;
  Router router({}, {model(1)});
  router.set_replica("m", 0, ready_at(engine.port()));
  router.start();
  std::string url = "http://127.0.0.1:" + std::to_string(router.port()) + "/v1/completions";
  for (Fault fault : {Fault::kCutBeforeHead, Fault::kAnswer503}) {
    engine.fail(fault);
    HttpReply reply = http_post_json(url, R"({"model":"m","prompt":[1],"max_tokens":3})");
    EXPECT_EQ(reply.status, 200) << reply.body;
    EXPECT_EQ(Json::parse(reply.body)["choices"][0]["token_ids"], Json({1000, 1001, 1002}));
  }
  // A stream cut before its first event is retried as it was.
  engine.fail(Fault::kCut, 0);
  expect_one_whole_run(stream_request(router.port(), "/v1/completions", stream_body(5)), 5);
  EXPECT_FALSE(engine.bodies().back().contains("resume_token_ids"));
  EXPECT_EQ(metric(router, R"(gpufrac:node_retried_requests_total{model="m"})"), 3);
}

TEST(RouterResilience, AThirdPartyStreamCutMidwayIsCutForTheClient) {
  TokenEngine engine;
  engine.fail(Fault::kCut, 3);
  Router router({}, {model(1, /*resumable=*/false)});
  router.set_replica("m", 0, ready_at(engine.port()));
  router.start();
  testing::RawReply reply = stream_request(router.port(), "/v1/completions", stream_body(8));
  EXPECT_FALSE(reply.complete) << "a false end of stream";
  EXPECT_EQ(read_stream(reply).ids.size(), 3u);
  EXPECT_EQ(engine.bodies().size(), 1u);
  // The client sees the cut as the proxy aborts its connection, just before the router counts it.
  EXPECT_TRUE(eventually(
      [&] {
        return metric(router,
                      R"(gpufrac:node_failed_requests_total{model="m",reason="engine_failed"})") == 1;
      },
      5));
}

TEST(RouterResilience, ARequestThatBreaksEveryEngineGivesUpAfterItsResends) {
  TokenEngine engine;
  engine.fail(Fault::kCut, 2, 100);
  Router router({}, {model(1)});
  router.set_replica("m", 0, ready_at(engine.port()));
  router.start();
  testing::RawReply reply = stream_request(router.port(), "/v1/completions", stream_body(40));
  EXPECT_FALSE(reply.complete);
  EXPECT_EQ(engine.bodies().size(), size_t(1 + kMaxResends));
  EXPECT_EQ(read_stream(reply).ids.size(), size_t(2 * (1 + kMaxResends)));
}

TEST(RouterResilience, RequestsWaitInOrderUntilAReplicaIsReady) {
  TokenEngine engine;
  Router router({}, {model(1)});
  router.start();  // nothing ready yet: a node that is starting
  std::vector<testing::RawReply> replies(3);
  std::vector<std::thread> clients;
  for (int i = 0; i < 3; ++i)
    clients.push_back(waiting_request(router, replies[size_t(i)], i, 10 + i));
  router.set_replica("m", 0, ready_at(engine.port()));
  for (std::thread& c : clients) c.join();
  for (const auto& reply : replies) expect_one_whole_run(reply, 4);
  std::vector<Json> bodies = engine.bodies();
  ASSERT_EQ(bodies.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bodies[size_t(i)]["prompt"][0], 10 + i) << "out of order";
  EXPECT_EQ(metric(router, R"(gpufrac:node_held_requests_total{model="m"})"), 3);
}

TEST(RouterResilience, PastRestartWaitOrTheQueueLimitItIs503WithRetryAfter) {
  Router router({}, {model(1, true, /*wait_s=*/0.4, /*limit=*/1)});
  router.set_replica("m", 0, not_ready("restarting"));
  router.start();
  testing::RawReply waited;
  int64_t start = monotonic_ns();
  std::thread first = waiting_request(router, waited);
  testing::RawReply full = stream_request(router.port(), "/v1/completions", stream_body(4));
  EXPECT_EQ(full.status, 503);
  EXPECT_EQ(Json::parse(full.body)["error"]["code"], "queue_full") << full.body;
  EXPECT_EQ(full.head.header("retry-after"), "1");
  first.join();
  EXPECT_GE(monotonic_ns() - start, 400'000'000);
  EXPECT_EQ(waited.status, 503);
  EXPECT_EQ(Json::parse(waited.body)["error"]["code"], "model_not_ready") << waited.body;
  EXPECT_NE(waited.body.find("restarting"), std::string::npos) << waited.body;
  EXPECT_EQ(waited.head.header("retry-after"), "1");
  EXPECT_EQ(
      metric(router, R"(gpufrac:node_failed_requests_total{model="m",reason="wait_timeout"})"), 1);
  EXPECT_EQ(metric(router, R"(gpufrac:node_failed_requests_total{model="m",reason="queue_full"})"),
            1);
  EXPECT_TRUE(router.wait_idle(2));
}

TEST(RouterResilience, AFailedModelIsAnswered503AtOnceWithItsWaitingRequests) {
  Router router({}, {model(1)});
  router.set_replica("m", 0, not_ready("restarting"));
  router.start();
  testing::RawReply waiting;
  std::thread client = waiting_request(router, waiting);
  router.set_replica("m", 0, not_ready("failed: exited 5 times in a row", /*failed=*/true));
  client.join();
  testing::RawReply later = stream_request(router.port(), "/v1/completions", stream_body(4));
  for (const testing::RawReply* reply : {&waiting, &later}) {
    EXPECT_EQ(reply->status, 503);
    EXPECT_EQ(Json::parse(reply->body)["error"]["code"], "model_failed") << reply->body;
    EXPECT_NE(reply->body.find("exited 5 times"), std::string::npos) << reply->body;
  }
  EXPECT_EQ(
      metric(router, R"(gpufrac:node_failed_requests_total{model="m",reason="model_failed"})"), 2);
  EXPECT_TRUE(router.wait_idle(2));
}

TEST(RouterResilience, DrainAnswersTheWaitingRequests) {
  Router router({}, {model(1)});
  router.start();
  testing::RawReply waiting;
  std::thread client = waiting_request(router, waiting);
  router.begin_drain();
  client.join();
  EXPECT_EQ(waiting.status, 503);
  EXPECT_NE(waiting.body.find("node_draining"), std::string::npos) << waiting.body;
  EXPECT_TRUE(router.wait_idle(2));
}

}  // namespace
}  // namespace gpufrac
