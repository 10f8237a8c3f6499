// Throws 10,000 malformed requests at a live server from four clients at once — bad JSON bodies
// in well-formed HTTP, and broken HTTP itself. Every well-formed HTTP request must get a complete
// reply (200 for the rare accidentally valid body, else a 4xx with an OpenAI error body); the
// server must survive the broken ones, then still serve, with every KV block free.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "common/json.h"
#include "fuzz_request_corpus.h"
#include "server_test_client.h"
#include "server_test_fixture.h"

namespace gpufrac::testing {
namespace {

std::string broken_http(std::mt19937& rng, const std::string& body) {
  std::string request = http_post("/v1/completions", body);
  switch (rng() % 6) {
    case 0: return mutate(request, rng) + "\r\n\r\n";
    case 1: return "POST /v1/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n" + body;
    case 2: return "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + body;
    case 3: return "POST /v1/completions HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n";
    case 4: return "GET /" + std::string(70000, 'a') + " HTTP/1.1\r\n\r\n";
    default: return std::string(1 + rng() % 64, char(rng() % 256)) + "\r\n\r\n";
  }
}

TEST(FuzzServer, TenThousandMalformedRequestsFromFourClients) {
  ServerSetup setup;
  setup.model_name = "fuzz";
  setup.runner.vocab_size = 500;
  FakeServer server(setup);
  std::atomic<int> answered{0}, malformed_replies{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      std::mt19937 rng(777 + c);
      for (int i = 0; i < 2500; ++i) {
        std::string body = fuzz_body(rng, 500);
        if (rng() % 10 == 0) {  // broken HTTP: only survival is required
          http_exchange(server.port(), broken_http(rng, body), 2, "", /*end_after_send=*/true);
          continue;
        }
        RawReply r = http_exchange(server.port(), http_post("/v1/completions", body), 20);
        bool ok = r.complete && (r.status == 200 || (r.status >= 400 && r.status < 500));
        if (ok && r.status != 200) {
          Json error = Json::parse(r.body, nullptr, false);
          ok = error.is_object() && error.contains("error") && error["error"]["message"].is_string();
        }
        if (!ok) {
          ++malformed_replies;
          ADD_FAILURE() << "status " << r.status << " " << r.error << " for " << body << " -> "
                        << r.body;
        }
        ++answered;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_GT(answered.load(), 8500);  // the other ~10% were broken HTTP
  EXPECT_EQ(malformed_replies.load(), 0);
  RawReply fine = http_exchange(server.port(),
                           http_post("/v1/completions", R"({"prompt":[1,2,3],"max_tokens":4})"));
  EXPECT_EQ(fine.status, 200) << fine.body;
  for (int i = 0; i < 500 && scrape(server.port(), "gpufrac:kv_cache_blocks_used") != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(scrape(server.port(), "gpufrac:kv_cache_blocks_used"), 0);
}

}  // namespace
}  // namespace gpufrac::testing
