// Who may call what through the router, and how often, against in-process engines that record
// the Authorization header they get and answer when the test lets them: per-model keys (401
// without one, 403 on another model, /v1/models per key, the client's key never forwarded, the
// engine key sent instead), and the admission limits (max_requests_in_flight with held requests
// counted, retries not admitted twice; requests_per_second; 429 with Retry-After; the other model
// unaffected; the slots given back).
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "common/json.h"
#include "common/raw_http_exchange.h"
#include "node/router.h"
#include "node_test_util.h"
#include "router_test_util.h"

namespace gpufrac {
namespace {

using testing::eventually;
using testing::ready_at;
using testing::RawReply;

// An engine stand-in: answers POST /v1/completions with `status` (JSON), at once or — while
// held — when release() is called; records each request's Authorization header.
class RecordingUpstream {
 public:
  explicit RecordingUpstream(int status = 200) : status_(status), server_(HttpServerOptions{}) {
    server_.route("POST", "/v1/completions",
                  [this](const HttpRequest& q, std::shared_ptr<HttpResponse> r) {
                    std::lock_guard lock(mutex_);
                    authorizations_.emplace_back(q.header("authorization"));
                    if (holding_) {
                      waiting_.push_back(std::move(r));
                    } else {
                      r->send(status_, "application/json", R"({"text":"ok"})");
                    }
                  });
    server_.start();
  }
  ~RecordingUpstream() {
    release();
    server_.stop();
  }
  int port() const { return server_.port(); }
  void hold() {
    std::lock_guard lock(mutex_);
    holding_ = true;
  }
  void release() {
    std::lock_guard lock(mutex_);
    holding_ = false;
    for (auto& r : waiting_) r->send(status_, "application/json", R"({"text":"ok"})");
    waiting_.clear();
  }
  size_t waiting() {
    std::lock_guard lock(mutex_);
    return waiting_.size();
  }
  std::vector<std::string> authorizations() {
    std::lock_guard lock(mutex_);
    return authorizations_;
  }

 private:
  int status_;
  std::mutex mutex_;
  bool holding_ = false;
  std::vector<std::shared_ptr<HttpResponse>> waiting_;
  std::vector<std::string> authorizations_;
  HttpServer server_;
};

RouterModel model(const std::string& name, std::vector<std::string> keys = {},
                  int max_in_flight = 0, double rate = 0, int replicas = 1) {
  RouterModel m{name, replicas, false, /*restart_wait_s=*/5};
  m.api_keys = std::move(keys);
  m.max_requests_in_flight = max_in_flight;
  m.requests_per_second = rate;
  return m;
}

// One request to the router with the key (none when empty), read whole, headers included.
RawReply call(const Router& router, const std::string& method, const std::string& path,
              const std::string& body, const std::string& key) {
  std::string wire = method + " " + path + " HTTP/1.1\r\nHost: test\r\n";
  if (!key.empty()) wire += "Authorization: Bearer " + key + "\r\n";
  if (method == "POST") {
    wire +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  return testing::http_exchange(router.port(), wire + "\r\n" + body, 20);
}
RawReply complete(const Router& router, const std::string& model, const std::string& key) {
  return call(router, "POST", "/v1/completions",
              Json{{"model", model}, {"prompt", "hi"}, {"stream", false}}.dump(), key);
}
std::string error_code(const RawReply& reply) {
  Json body = Json::parse(reply.body, nullptr, false);
  return body.is_object() ? body["error"].value("code", "") : "not json: " + reply.body;
}
std::set<std::string> listed(const RawReply& reply) {
  std::set<std::string> ids;
  Json list = Json::parse(reply.body);
  for (const Json& m : list["data"]) ids.insert(m["id"].get<std::string>());
  return ids;
}
double metric(const Router& router, const std::string& sample) {
  RawReply reply = call(router, "GET", "/metrics", "", "");
  size_t at = reply.body.find(sample + " ");
  return at == std::string::npos ? -1 : std::stod(reply.body.substr(at + sample.size() + 1));
}

TEST(RouterAccess, AKeyCallsItsModelsOnlyAndNeverReachesTheEngine) {
  RecordingUpstream a, b;
  Router router({}, {model("a", {"ka", "both"}), model("b", {"kb", "both"})}, "engine-secret");
  router.set_replica("a", 0, ready_at(a.port()));
  router.set_replica("b", 0, ready_at(b.port()));
  router.start();

  EXPECT_EQ(complete(router, "a", "").status, 401);
  EXPECT_EQ(error_code(complete(router, "a", "kc")), "invalid_api_key");
  EXPECT_EQ(call(router, "GET", "/v1/models", "", "").status, 401);
  EXPECT_EQ(call(router, "GET", "/no/such/path", "", "").status, 401);
  for (const char* open : {"/health", "/metrics", "/ping"})
    EXPECT_EQ(call(router, "GET", open, "", "").status, 200) << open;

  RawReply forbidden = complete(router, "b", "ka");
  EXPECT_EQ(forbidden.status, 403);
  EXPECT_EQ(error_code(forbidden), "model_not_allowed");
  EXPECT_EQ(forbidden.body.find("ka"), std::string::npos) << forbidden.body;
  EXPECT_EQ(complete(router, "a", "ka").status, 200);
  EXPECT_EQ(complete(router, "b", "kb").status, 200);
  EXPECT_EQ(complete(router, "b", "both").status, 200);
  EXPECT_EQ(error_code(complete(router, "nope", "ka")), "model_not_found");

  EXPECT_EQ(listed(call(router, "GET", "/v1/models", "", "ka")), std::set<std::string>{"a"});
  EXPECT_EQ(listed(call(router, "GET", "/v1/models", "", "kb")), std::set<std::string>{"b"});
  EXPECT_EQ(listed(call(router, "GET", "/v1/models", "", "both")),
            (std::set<std::string>{"a", "b"}));

  // The engines saw the router's engine key, never a client's.
  EXPECT_EQ(a.authorizations(), std::vector<std::string>{"Bearer engine-secret"});
  EXPECT_EQ(b.authorizations(),
            (std::vector<std::string>{"Bearer engine-secret", "Bearer engine-secret"}));
}

TEST(RouterAccess, WithoutModelKeysTheClientsHeaderPassesUnlessThereIsAnEngineKey) {
  RecordingUpstream a;
  {
    Router router({}, {model("a")});
    router.set_replica("a", 0, ready_at(a.port()));
    router.start();
    EXPECT_EQ(complete(router, "a", "").status, 200);
    EXPECT_EQ(complete(router, "a", "the-engines-own").status, 200);
    EXPECT_EQ(listed(call(router, "GET", "/v1/models", "", "")), std::set<std::string>{"a"});
  }
  {
    Router router({}, {model("a")}, "engine-secret");
    router.set_replica("a", 0, ready_at(a.port()));
    router.start();
    EXPECT_EQ(complete(router, "a", "anything").status, 200);
  }
  EXPECT_EQ(a.authorizations(),
            (std::vector<std::string>{"", "Bearer the-engines-own", "Bearer engine-secret"}));
}

// max_requests_in_flight counts requests from acceptance to their end: those held while no
// replica is ready too. Past it: 429 at once (not held), while the other model serves.
TEST(RouterAccess, InFlightLimitCountsHeldRequestsAndSpares429sForTheOtherModel) {
  RecordingUpstream a, b;
  Router router({}, {model("a", {"k"}, 2), model("b", {"k"})});
  router.set_replica("b", 0, ready_at(b.port()));
  router.start();

  std::vector<RawReply> held(2);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < held.size(); ++i)
    clients.emplace_back([&, i] { held[i] = complete(router, "a", "k"); });
  ASSERT_TRUE(eventually(
      [&] { return metric(router, "gpufrac:node_requests_waiting{model=\"a\"}") == 2; }, 5));
  EXPECT_EQ(metric(router, "gpufrac:node_requests_in_flight{model=\"a\"}"), 2);

  RawReply refused = complete(router, "a", "k");
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(error_code(refused), "too_many_requests_in_flight");
  EXPECT_EQ(refused.head.header("retry-after"), "1");
  EXPECT_EQ(complete(router, "b", "k").status, 200);  // the other model is not limited

  router.set_replica("a", 0, ready_at(a.port()));
  for (std::thread& c : clients) c.join();
  for (const RawReply& r : held) EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(
      metric(router, "gpufrac:node_failed_requests_total{model=\"a\",reason=\"in_flight_limit\"}"),
      1);
  EXPECT_TRUE(eventually(
      [&] { return metric(router, "gpufrac:node_requests_in_flight{model=\"a\"}") == 0; }, 5));
  EXPECT_EQ(complete(router, "a", "k").status, 200);  // the slots were given back
}

// A request whose engine answered 503 is sent again to the other replica: a retry of an
// accepted request is not admitted again, so it is not refused by its own slot.
TEST(RouterAccess, ARetryIsNotAdmittedTwice) {
  RecordingUpstream stopping(503), serving;
  Router router({}, {model("a", {}, /*max_in_flight=*/1, 0, /*replicas=*/2)});
  router.set_replica("a", 0, ready_at(stopping.port()));
  router.set_replica("a", 1, ready_at(serving.port()));
  router.start();
  RawReply reply = complete(router, "a", "");
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(stopping.authorizations().size(), 1u);
  EXPECT_EQ(serving.authorizations().size(), 1u);
  EXPECT_TRUE(eventually(
      [&] { return metric(router, "gpufrac:node_requests_in_flight{model=\"a\"}") == 0; }, 5));
}

TEST(RouterAccess, RequestsPerSecondIs429WithRetryAfterAndSparesTheOtherModel) {
  RecordingUpstream a, b;
  Router router({}, {model("a", {}, 0, /*rate=*/0.5), model("b")});
  router.set_replica("a", 0, ready_at(a.port()));
  router.set_replica("b", 0, ready_at(b.port()));
  router.start();
  EXPECT_EQ(complete(router, "a", "").status, 200);  // the bucket's one token
  RawReply refused = complete(router, "a", "");
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(error_code(refused), "rate_limit_exceeded");
  int retry_after = std::stoi(std::string(refused.head.header("retry-after")));
  EXPECT_GE(retry_after, 1);
  EXPECT_LE(retry_after, 2);  // one token every 2 s
  for (int i = 0; i < 5; ++i) EXPECT_EQ(complete(router, "b", "").status, 200);
  EXPECT_EQ(metric(router, "gpufrac:node_failed_requests_total{model=\"a\",reason=\"rate_limit\"}"),
            1);
  EXPECT_EQ(a.authorizations().size(), 1u);  // the refused one never reached the engine
}

// Held responses: a request in flight at the engine holds its slot until its last byte.
TEST(RouterAccess, ASlotIsHeldUntilTheEnginesAnswerEnds) {
  RecordingUpstream a;
  a.hold();
  Router router({}, {model("a", {}, 1)});
  router.set_replica("a", 0, ready_at(a.port()));
  router.start();
  RawReply first;
  std::thread client([&] { first = complete(router, "a", ""); });
  ASSERT_TRUE(eventually([&] { return a.waiting() == 1; }, 5));
  EXPECT_EQ(complete(router, "a", "").status, 429);
  a.release();
  client.join();
  EXPECT_EQ(first.status, 200);
  EXPECT_TRUE(eventually([&] { return complete(router, "a", "").status == 200; }, 5));
}

}  // namespace
}  // namespace gpufrac
