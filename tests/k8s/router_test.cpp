// `gpufrac k8s router`'s ClusterRouter in front of two fake engines (bench's scripted SSE server,
// in process): a request goes to the model its body names, streamed through; a model whose
// health URL stops answering 200 gets 503 model_not_ready while the other keeps serving; an
// upstream given by host name (as a Service is) is reached.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

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

}  // namespace
}  // namespace gpufrac::k8s
