#include "common/http_server.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/api_key.h"
#include "common/http_client.h"
#include "common/json.h"
#include "common/raw_http_exchange.h"

namespace gpufrac {
namespace {

using namespace std::chrono_literals;

// Sends raw bytes and reads until the server closes or `timeout` passes.
std::string raw_exchange(int port, const std::string& wire, int timeout_ms = 2000) {
  int fd = testing::connect_local(port);
  EXPECT_GE(fd, 0);
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::send(fd, wire.data(), wire.size(), MSG_NOSIGNAL);
  std::string out;
  char buffer[4096];
  ssize_t n;
  while ((n = ::recv(fd, buffer, sizeof buffer, 0)) > 0) out.append(buffer, size_t(n));
  ::close(fd);
  return out;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerOptions options;
    options.max_body_bytes = 1000;
    server_ = std::make_unique<HttpServer>(options);
    server_->route("GET", "/health", [](const HttpRequest&, std::shared_ptr<HttpResponse> r) {
      r->send(200, "text/plain", "ok");
    });
    server_->route("POST", "/echo", [](const HttpRequest& req, std::shared_ptr<HttpResponse> r) {
      r->send(200, "application/json", req.body);
    });
    server_->route("GET", "/stream", [this](const HttpRequest&, std::shared_ptr<HttpResponse> r) {
      r->on_disconnect([this] { disconnects_++; });
      r->start_stream(200, "text/event-stream");
      // Answer from another thread, as the engine does.
      std::thread([r] {
        for (int i = 0; i < 5; ++i) {
          r->write("data: " + std::to_string(i) + "\n\n");
          std::this_thread::sleep_for(1ms);
        }
        r->write("data: [DONE]\n\n");
        r->end();
      }).detach();
    });
    server_->route("GET", "/forever", [this](const HttpRequest&, std::shared_ptr<HttpResponse> r) {
      r->on_disconnect([this] { disconnects_++; });
      r->start_stream(200, "text/event-stream");
      std::thread([r, this] {
        while (r->write("data: tick\n\n")) std::this_thread::sleep_for(2ms);
        writes_refused_++;
      }).detach();
    });
    server_->start();
    base_ = "http://127.0.0.1:" + std::to_string(server_->port());
  }

  std::unique_ptr<HttpServer> server_;
  std::string base_;
  std::atomic<int> disconnects_{0};
  std::atomic<int> writes_refused_{0};
};

TEST_F(HttpServerTest, CompleteAndEchoResponses) {
  HttpReply health = http_get(base_ + "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok");
  HttpReply echo = http_post_json(base_ + "/echo", R"({"a":1})");
  EXPECT_EQ(echo.status, 200);
  EXPECT_EQ(echo.body, R"({"a":1})");
}

TEST_F(HttpServerTest, StreamsChunksFromAnotherThread) {
  HttpReply reply = http_get(base_ + "/stream");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body,
            "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\ndata: [DONE]\n\n");
  EXPECT_EQ(disconnects_.load(), 0);
}

TEST_F(HttpServerTest, ClientDisconnectRunsCallbackAndRefusesWrites) {
  HttpReply reply = http_get(base_ + "/forever", 0.1);  // gives up after 100 ms
  EXPECT_EQ(reply.status, 0);
  for (int i = 0; i < 200 && (disconnects_ == 0 || writes_refused_ == 0); ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(disconnects_.load(), 1);
  EXPECT_EQ(writes_refused_.load(), 1);
}

TEST_F(HttpServerTest, ErrorsAreOpenAiStyle) {
  HttpReply missing = http_get(base_ + "/nope");
  EXPECT_EQ(missing.status, 404);
  Json body = Json::parse(missing.body);
  EXPECT_TRUE(body["error"]["message"].is_string());
  EXPECT_EQ(body["error"]["type"], "not_found_error");
  EXPECT_EQ(http_request("POST", base_ + "/health", "x").status, 405);
  EXPECT_EQ(http_post_json(base_ + "/echo", std::string(2000, 'x')).status, 413);
  // A path that is not UTF-8 is quoted in the 404's message with U+FFFD, not a crash.
  std::string not_utf8 = raw_exchange(server_->port(), "GET /\xc3n\xff HTTP/1.1\r\n\r\n");
  ASSERT_NE(not_utf8.find("404"), std::string::npos) << not_utf8;
  Json quoted = Json::parse(not_utf8.substr(not_utf8.find("\r\n\r\n") + 4), nullptr, false);
  ASSERT_TRUE(quoted.is_object()) << not_utf8;
  EXPECT_EQ(quoted["error"]["message"], "no such endpoint: /\xef\xbf\xbdn\xef\xbf\xbd");
  std::string bad = raw_exchange(server_->port(), "NOT HTTP AT ALL\r\n\r\n");
  EXPECT_NE(bad.find("400 Bad Request"), std::string::npos) << bad;
  EXPECT_NE(bad.find("\"error\""), std::string::npos);
}

TEST_F(HttpServerTest, KeepAliveAndPipeliningAnswerInOrder) {
  std::string wire =
      "GET /health HTTP/1.1\r\n\r\n"
      "POST /echo HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
      "GET /stream HTTP/1.1\r\nConnection: close\r\n\r\n";
  std::string out = raw_exchange(server_->port(), wire);
  size_t first = out.find("ok");
  size_t second = out.find("abc");
  size_t third = out.find("data: [DONE]");
  ASSERT_NE(first, std::string::npos) << out;
  ASSERT_NE(second, std::string::npos) << out;
  ASSERT_NE(third, std::string::npos) << out;
  EXPECT_LT(first, second);
  EXPECT_LT(second, third);
}

// An API key gate (common/api_key.h, as `gpufrac serve --api-key` sets it): /health open, every
// other path — unknown ones too, so that a caller without a key learns nothing of the routes —
// 401 without the key, with an OpenAI-style body that never repeats the key sent; the connection
// stays usable after a refusal.
TEST(HttpServerGate, AnswersBeforeRoutingAndKeepsTheConnection) {
  HttpServer server(HttpServerOptions{});
  ApiKeyTable keys;
  keys.add("k1");
  server.gate([&keys](const HttpRequest& request, HttpResponse& response) {
    return request.head.path == "/health" || authorize(request, keys, response) != nullptr;
  });
  server.route("GET", "/health", [](const HttpRequest&, std::shared_ptr<HttpResponse> r) {
    r->send(200, "text/plain", "ok");
  });
  server.route("GET", "/v1/models", [](const HttpRequest&, std::shared_ptr<HttpResponse> r) {
    r->send(200, "application/json", "{}");
  });
  server.start();
  std::string base = "http://127.0.0.1:" + std::to_string(server.port());
  EXPECT_EQ(http_get(base + "/health").status, 200);
  HttpReply none = http_get(base + "/v1/models");
  EXPECT_EQ(none.status, 401);
  Json body = Json::parse(none.body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << none.body;
  EXPECT_EQ(body["error"]["code"], "invalid_api_key");
  EXPECT_EQ(body["error"]["type"], "authentication_error");
  HttpReply wrong = http_get(base + "/v1/models", 10, {"Authorization: Bearer guess-k1"});
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(wrong.body.find("guess"), std::string::npos) << wrong.body;
  EXPECT_NE(wrong.body, none.body);  // "not valid" rather than "needs a key"
  EXPECT_EQ(http_get(base + "/nope").status, 401);
  EXPECT_EQ(http_get(base + "/v1/models", 10, {"Authorization: Bearer k1"}).status, 200);
  EXPECT_EQ(http_get(base + "/nope", 10, {"Authorization: bearer k1"}).status, 404);
  std::string wire =
      "GET /v1/models HTTP/1.1\r\n\r\n"
      "GET /v1/models HTTP/1.1\r\nAuthorization: Bearer k1\r\nConnection: close\r\n\r\n";
  std::string out = raw_exchange(server.port(), wire);
  size_t refused = out.find("HTTP/1.1 401");
  size_t served = out.find("HTTP/1.1 200");
  ASSERT_NE(refused, std::string::npos) << out;
  ASSERT_NE(served, std::string::npos) << out;
  EXPECT_LT(refused, served);
  EXPECT_NE(out.find("WWW-Authenticate: Bearer"), std::string::npos) << out;
}

TEST_F(HttpServerTest, BindFailureNamesTheAddress) {
  HttpServerOptions options;
  options.port = server_->port();
  HttpServer second(options);
  try {
    second.start();
    FAIL() << "bound twice";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(server_->port())), std::string::npos);
  }
}

TEST(HttpClient, ParsesUrlsAndReportsRefusal) {
  HttpUrl url = parse_http_url("http://localhost:8123/v1/models", "--target");
  EXPECT_EQ(url.host, "localhost");
  EXPECT_EQ(url.port, 8123);
  EXPECT_EQ(url.path, "/v1/models");
  EXPECT_THROW(parse_http_url("https://x", "--target"), std::exception);
  HttpReply reply = http_get("http://127.0.0.1:1/health", 1);
  EXPECT_EQ(reply.status, 0);
  EXPECT_FALSE(reply.error.empty());
}

}  // namespace
}  // namespace gpufrac
