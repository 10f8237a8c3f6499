// `gpufrac k8s router`'s ClusterRouter in front of two fake engines (bench's scripted SSE server,
// in process): a request goes to the model its body names, streamed through; a model whose
// health URL stops answering 200 gets 503 model_not_ready while the other keeps serving; an
// upstream given by host name (as a Service is) is reached; keys and limits from its flags.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "common/error.h"
#include "common/http_client.h"
#include "fakes/scripted_sse_server.h"
#include "k8s/cluster_router.h"

namespace gpufrac::k8s {
namespace {

bool eventually(const std::function<bool()>& condition, double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

ScriptedSseOptions engine(const std::string& name) {
  ScriptedSseOptions options;
  options.ttft_ms = 1;
  options.itl_ms = 1;
  options.models = {name};
  return options;
}

TEST(ClusterRouter, RoutesByModelToEachUpstreamAndFollowsItsHealth) {
  ScriptedSseServer a(engine("a")), b(engine("b"));
  a.start();
  b.start();
  ClusterRouter router(
      HttpServerOptions{"127.0.0.1", 0},
      parse_upstreams({"a=" + a.url() + "/v1/models", "b=" + b.url() + "/v1/models"}), 0.05,
      /*restart_wait_s=*/0);
  router.start();
  std::string url = "http://127.0.0.1:" + std::to_string(router.port());
  ASSERT_TRUE(eventually([&] { return http_get(url + "/health", 1).status == 200; }, 10));
  HttpReply reply =
      http_post_json(url + "/v1/completions",
                     R"({"model": "b", "prompt": "hi", "max_tokens": 3, "stream": true})");
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(b.requests_received(), 1);
  EXPECT_EQ(a.requests_received(), 0);

  a.stop();
  HttpReply down;
  EXPECT_TRUE(eventually(
      [&] {
        down =
            http_post_json(url + "/v1/completions",
                           R"({"model": "a", "prompt": "hi", "max_tokens": 3, "stream": true})", 2);
        return down.status == 503 && down.body.find("model_not_ready") != std::string::npos;
      },
      10))
      << down.body;
  EXPECT_EQ(http_post_json(url + "/v1/completions",
                           R"({"model": "b", "prompt": "hi", "max_tokens": 3, "stream": true})")
                .status,
            200);
  EXPECT_EQ(
      http_post_json(url + "/v1/completions", R"({"model": "c", "prompt": "hi", "stream": true})")
          .status,
      404);
  router.stop(1);
}

TEST(ClusterRouter, ReachesAnUpstreamByHostName) {
  ScriptedSseServer a(engine("a"));
  a.start();
  std::string by_name = a.url();
  by_name.replace(by_name.find("127.0.0.1"), 9, "localhost");
  ClusterRouter router(HttpServerOptions{"127.0.0.1", 0},
                       parse_upstreams({"a=" + by_name + "/v1/models"}), 0.05);
  router.start();
  std::string url = "http://127.0.0.1:" + std::to_string(router.port());
  ASSERT_TRUE(eventually([&] { return http_get(url + "/health", 1).status == 200; }, 10));
  HttpReply reply =
      http_post_json(url + "/v1/completions",
                     R"({"model": "a", "prompt": "hi", "max_tokens": 3, "stream": true})");
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(a.requests_received(), 1);
  router.stop(1);
}

// --api-keys-env and the limit flags: keys from the variables (as the Secret sets them), 401
// without a key, 403 on another model, the limits on the upstreams; and the one-line refusals.
TEST(ClusterRouter, KeysFromTheEnvironmentAndLimitsPerModel) {
  ScriptedSseServer a(engine("a")), b(engine("b"));
  a.start();
  b.start();
  std::vector<Upstream> upstreams =
      parse_upstreams({"a=" + a.url() + "/v1/models", "b=" + b.url() + "/v1/models"});
  ::setenv("GFN_ROUTER_A_KEYS", "ka", 1);
  ::setenv("GFN_ROUTER_B_KEYS", "kb,kb2", 1);
  apply_access_flags(upstreams,
                     {{"a=GFN_ROUTER_A_KEYS", "b=GFN_ROUTER_B_KEYS"}, {"a=3"}, {"b=100"}});
  EXPECT_EQ(upstreams[0].api_keys, std::vector<std::string>{"ka"});
  EXPECT_EQ(upstreams[1].api_keys, (std::vector<std::string>{"kb", "kb2"}));
  EXPECT_EQ(upstreams[0].max_requests_in_flight, 3);
  EXPECT_DOUBLE_EQ(upstreams[1].requests_per_second, 100);
  ClusterRouter router(HttpServerOptions{"127.0.0.1", 0}, upstreams, 0.05, 0);
  router.start();
  std::string url = "http://127.0.0.1:" + std::to_string(router.port());
  ASSERT_TRUE(eventually([&] { return http_get(url + "/health", 1).status == 200; }, 10));
  std::string body = R"({"model": "a", "prompt": "hi", "max_tokens": 3, "stream": true})";
  auto post = [&](const std::string& key) {
    return http_request("POST", url + "/v1/completions", body, 10, "application/json",
                        {"Authorization: Bearer " + key})
        .status;
  };
  EXPECT_EQ(http_post_json(url + "/v1/completions", body).status, 401);
  EXPECT_EQ(post("kb2"), 403);
  EXPECT_EQ(post("ka"), 200);
  EXPECT_EQ(http_get(url + "/ping").status, 200);
  router.stop(1);

  std::vector<Upstream> two = parse_upstreams({"a=http://x:1/h", "b=http://y:1/h"});
  auto error_of = [&](UpstreamAccessFlags flags) {
    std::vector<Upstream> copy = two;
    try {
      apply_access_flags(copy, flags);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error_of({{"a=GFN_ROUTER_A_KEYS"}, {}, {}}).find("the model 'b' has no keys"),
            std::string::npos);
  EXPECT_NE(error_of({{"c=GFN_ROUTER_A_KEYS"}, {}, {}}).find("no --upstream is named 'c'"),
            std::string::npos);
  EXPECT_NE(error_of({{"a=GFN_ROUTER_UNSET", "b=GFN_ROUTER_B_KEYS"}, {}, {}})
                .find("$GFN_ROUTER_UNSET is not set"),
            std::string::npos);
  EXPECT_NE(error_of({{}, {"a=0"}, {}}).find("1..1048576"), std::string::npos);
  EXPECT_NE(error_of({{}, {}, {"a"}}).find("is not MODEL=VALUE"), std::string::npos);
  ::unsetenv("GFN_ROUTER_A_KEYS");
  ::unsetenv("GFN_ROUTER_B_KEYS");
}

}  // namespace
}  // namespace gpufrac::k8s
