// `gpufrac serve --model tiny --device cpu --api-key k1` as a process, as vLLM users call it:
// without a key or with a wrong one every path but /health and /metrics answers 401 (unknown paths
// too), `Authorization: Bearer k1` gets 200, a second --api-key works as well, and no key reaches
// the log. Then the keys from $GPUFRAC_API_KEY with a --metrics-key guarding /metrics, and the
// one-line refusal of a variable that holds no key.
#include <gtest/gtest.h>

#include <cstdlib>

#include "common/json.h"
#include "serve_process.h"
#include "server_test_client.h"

namespace gpufrac::testing {
namespace {

using namespace std::chrono_literals;

const char* kCompletion = R"({"model":"tiny","prompt":[1,2,3],"max_tokens":4,"temperature":0})";

std::string url(int port, const std::string& path) {
  return "http://127.0.0.1:" + std::to_string(port) + path;
}

std::vector<std::string> bearer(const std::string& key) {
  return {"Authorization: Bearer " + key};
}

int post(int port, const std::string& path, const std::string& body,
         const std::vector<std::string>& headers) {
  return http_request("POST", url(port, path), body, 60, "application/json", headers).status;
}

std::vector<std::string> serve_args(int port) {
  return {"--model",         "tiny", "--device",        "cpu", "--port",    std::to_string(port),
          "--max-model-len", "256",  "--memory-budget", "16M", "--threads", "1"};
}

TEST(ServeApiKey, NoKeyOrAWrongOneIs401AndBearerK1Is200) {
  int port = free_port();
  std::vector<std::string> args = serve_args(port);
  args.insert(args.end(), {"--api-key", "k1", "--api-key", "second-key-7f3a9c"});
  ServeProcess serve(args);
  ASSERT_TRUE(serve.wait_healthy(port, 120s)) << serve.log();

  EXPECT_EQ(http_get(url(port, "/health")).status, 200);
  EXPECT_EQ(http_get(url(port, "/metrics")).status, 200);
  for (const std::vector<std::string>& headers : {std::vector<std::string>{},
                                                  bearer("k2"),
                                                  bearer("k1x"),
                                                  {"Authorization: k1"},
                                                  {"Authorization: Basic azE6"}}) {
    HttpReply reply = http_request("POST", url(port, "/v1/completions"), kCompletion, 60,
                                   "application/json", headers);
    EXPECT_EQ(reply.status, 401) << (headers.empty() ? "no header" : headers[0]);
    Json body = Json::parse(reply.body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << reply.body;
    EXPECT_EQ(body["error"]["code"], "invalid_api_key");
    EXPECT_EQ(reply.body.find("k1"), std::string::npos) << reply.body;
    EXPECT_EQ(reply.body.find("k2"), std::string::npos) << reply.body;
  }
  EXPECT_EQ(http_get(url(port, "/v1/models")).status, 401);
  EXPECT_EQ(post(port, "/v1/chat/completions", "{}", {}), 401);
  EXPECT_EQ(post(port, "/tokenize", R"({"prompt":"hi"})", {}), 401);
  EXPECT_EQ(post(port, "/detokenize", R"({"tokens":[1]})", {}), 401);
  EXPECT_EQ(http_get(url(port, "/no/such/path")).status, 401);

  HttpReply ok = http_request("POST", url(port, "/v1/completions"), kCompletion, 60,
                              "application/json", bearer("k1"));
  EXPECT_EQ(ok.status, 200) << ok.body;
  Json completion = Json::parse(ok.body, nullptr, false);
  ASSERT_TRUE(completion.is_object()) << ok.body;
  EXPECT_EQ(completion["usage"]["completion_tokens"], 4);
  EXPECT_EQ(http_get(url(port, "/v1/models"), 10, bearer("k1")).status, 200);
  EXPECT_EQ(http_get(url(port, "/v1/models"), 10, bearer("second-key-7f3a9c")).status, 200);
  EXPECT_EQ(http_get(url(port, "/no/such/path"), 10, bearer("k1")).status, 404);

  EXPECT_EQ(serve.terminate(), 0);
  std::string log = serve.log();
  EXPECT_NE(log.find("needs one of 2 API key(s)"), std::string::npos) << log;
  EXPECT_EQ(log.find("second-key-7f3a9c"), std::string::npos) << log;
  EXPECT_EQ(log.find("Bearer"), std::string::npos) << log;
}

TEST(ServeApiKey, KeysFromTheEnvironmentAndAMetricsKey) {
  int port = free_port();
  std::vector<std::string> args = serve_args(port);
  args.insert(args.end(), {"--metrics-key", "scrape-1"});
  ::setenv("GPUFRAC_API_KEY", "env-key-1, env-key-2", 1);
  ServeProcess serve(args);
  ::unsetenv("GPUFRAC_API_KEY");
  ASSERT_TRUE(serve.wait_healthy(port, 120s)) << serve.log();
  EXPECT_EQ(http_get(url(port, "/v1/models")).status, 401);
  EXPECT_EQ(http_get(url(port, "/v1/models"), 10, bearer("env-key-2")).status, 200);
  EXPECT_EQ(post(port, "/v1/completions", kCompletion, bearer("env-key-1")), 200);
  EXPECT_EQ(http_get(url(port, "/metrics")).status, 401);
  EXPECT_EQ(http_get(url(port, "/metrics"), 10, bearer("env-key-1")).status, 401);
  HttpReply metrics = http_get(url(port, "/metrics"), 10, bearer("scrape-1"));
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("vllm:num_requests_running"), std::string::npos);
  EXPECT_EQ(http_get(url(port, "/health")).status, 200);
  EXPECT_EQ(serve.terminate(), 0);
}

TEST(ServeApiKey, AVariableWithoutAKeyIsRefusedInOneLine) {
  ::setenv("GPUFRAC_API_KEY", " , ", 1);
  ServeProcess serve(serve_args(free_port()));
  ::unsetenv("GPUFRAC_API_KEY");
  EXPECT_EQ(serve.wait_exit(), 2);
  EXPECT_NE(serve.log().find("GPUFRAC_API_KEY is set but holds no key"), std::string::npos)
      << serve.log();
}

}  // namespace
}  // namespace gpufrac::testing
