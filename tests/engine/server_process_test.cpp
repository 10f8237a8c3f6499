// `gpufrac serve` as a real process (by default `--model tiny --device cpu`; the gpu-labelled build
// of this file sets SERVE_MODEL/SERVE_DEVICE/SERVE_MEMORY_BUDGET): 1, 8, 64 and 256 concurrent
// streaming clients all complete with exactly the tokens they asked for; greedy output repeats;
// clients that hang up mid-stream are cancelled; and afterwards /metrics shows every KV block
// free. SIGTERM ends the server cleanly. Then the same driven by `gpufrac bench` (concurrency 1 to
// 256, and requests that bench abandons at its --request-timeout).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/json.h"
#include "serve_process.h"
#include "server_test_client.h"

#ifndef SERVE_MODEL
#define SERVE_SUITE ServeTinyCpu
#define SERVE_MODEL "tiny"
#define SERVE_DEVICE "cpu"
#define SERVE_MEMORY_BUDGET "64M"
#endif

namespace gpufrac::testing {
namespace {

using namespace std::chrono_literals;

std::string prompt_of(int i) {
  std::string p = "[";
  for (int t = 0; t < 8 + i % 24; ++t)
    p += (t ? "," : "") + std::to_string((i * 7919 + t * 104729) % 151936);
  return p + "]";
}

std::string stream_body(int i, int max_tokens) {
  return R"({"model":")" SERVE_MODEL R"(","prompt":)" + prompt_of(i) + R"(,"max_tokens":)" +
         std::to_string(max_tokens) +
         R"(,"temperature":0,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}})";
}

struct StreamOutcome {
  bool complete = false;
  int completion_tokens = -1;
  std::vector<int> token_ids;
};

StreamOutcome stream(int port, const std::string& body) {
  RawReply r = http_exchange(port, http_post("/v1/completions", body), 300);
  StreamOutcome out;
  std::vector<std::string> events = sse_data(r.body);
  out.complete = r.complete && r.status == 200 && !events.empty() && events.back() == "[DONE]";
  for (const std::string& e : events) {
    if (e == "[DONE]") break;
    Json chunk = Json::parse(e, nullptr, false);
    if (chunk.is_discarded()) return {};
    if (chunk.contains("usage") && chunk["usage"].is_object()) {
      out.completion_tokens = chunk["usage"]["completion_tokens"];
    }
    if (!chunk["choices"].empty()) out.token_ids.push_back(chunk["choices"][0]["token_ids"][0]);
  }
  return out;
}

bool metric_reaches(int port, const std::string& name, double value) {
  for (int i = 0; i < 600; ++i) {
    if (scrape(port, name) == value) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

TEST(SERVE_SUITE, ConcurrentClientsCompleteAndNoKvBlockLeaks) {
  int port = free_port();
  ServeProcess serve({"--model", SERVE_MODEL, "--device", SERVE_DEVICE, "--port",
                      std::to_string(port), "--max-model-len", "256", "--memory-budget",
                      SERVE_MEMORY_BUDGET, "--max-num-seqs", "256", "--max-num-batched-tokens",
                      "2048", "--threads", "2"});
  ASSERT_TRUE(serve.wait_healthy(port, 300s)) << serve.log();
  // All that 256 sequences of 256 tokens can use (tiny: 64 MiB / (16 x 1 KiB) is just that).
  EXPECT_EQ(scrape(port, "gpufrac:kv_cache_blocks_capacity"), 4096);

  const int max_tokens = 8;
  for (int concurrency : {1, 8, 64, 256}) {
    std::vector<StreamOutcome> outcomes(concurrency);
    std::vector<std::thread> clients;
    for (int i = 0; i < concurrency; ++i) {
      clients.emplace_back([&, i] { outcomes[i] = stream(port, stream_body(i, max_tokens)); });
    }
    for (auto& c : clients) c.join();
    for (int i = 0; i < concurrency; ++i) {
      ASSERT_TRUE(outcomes[i].complete) << "concurrency " << concurrency << " client " << i;
      EXPECT_EQ(outcomes[i].completion_tokens, max_tokens);
      EXPECT_EQ(outcomes[i].token_ids.size(), size_t(max_tokens));
    }
    if (concurrency == 8) {  // greedy decoding repeats, whatever else is in the batch
      EXPECT_EQ(stream(port, stream_body(3, max_tokens)).token_ids, outcomes[3].token_ids);
    }
    EXPECT_TRUE(metric_reaches(port, "gpufrac:kv_cache_blocks_used", 0)) << concurrency;
    double itl_s = scrape(port, "vllm:inter_token_latency_seconds_sum") /
                   scrape(port, "vllm:inter_token_latency_seconds_count");
    std::printf("[ info ] concurrency %d: mean inter-token latency so far %.2f ms\n", concurrency,
                itl_s * 1e3);
    EXPECT_EQ(scrape(port, "vllm:num_requests_running"), 0);
    EXPECT_EQ(scrape(port, "vllm:num_requests_waiting"), 0);
  }

  // 32 clients leave after their first token; their requests (200 tokens each) are cancelled.
  std::vector<std::thread> leavers;
  for (int i = 0; i < 32; ++i) {
    leavers.emplace_back([&, i] {
      http_exchange(port, http_post("/v1/completions", stream_body(i, 200)), 300,
                    "\"token_ids\":[");
    });
  }
  for (auto& c : leavers) c.join();
  EXPECT_TRUE(metric_reaches(port, "gpufrac:kv_cache_blocks_used", 0));
  EXPECT_EQ(scrape(port, "vllm:num_requests_running"), 0);
  HttpReply metrics = http_get("http://127.0.0.1:" + std::to_string(port) + "/metrics");
  EXPECT_NE(metrics.body.find("finished_reason=\"abort\"} 32"), std::string::npos) << metrics.body;
  EXPECT_EQ(serve.terminate(), 0) << serve.log();
}

// --memory-budget elastic: nothing is mapped before the first request, KV is mapped while a
// request runs, and once it is done the chunks go back after --kv-release-delay.
TEST(SERVE_SUITE, ElasticKvMapsUnderLoadAndGivesItBackAfterTheReleaseDelay) {
  int port = free_port();
  ServeProcess serve({"--model", SERVE_MODEL, "--device", SERVE_DEVICE, "--port",
                      std::to_string(port), "--max-model-len", "256", "--memory-budget", "elastic",
                      "--kv-release-delay", "200ms", "--max-num-seqs", "8", "--threads", "2"});
  ASSERT_TRUE(serve.wait_healthy(port, 300s)) << serve.log();
  EXPECT_EQ(scrape(port, "gpufrac:kv_cache_mapped_bytes"), 0);
  std::vector<StreamOutcome> outcomes(8);
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&, i] { outcomes[i] = stream(port, stream_body(i, 200)); });
  }
  bool mapped = false;
  for (int i = 0; i < 200 && !mapped; ++i) {
    mapped = scrape(port, "gpufrac:kv_cache_mapped_bytes") > 0;
    if (!mapped) std::this_thread::sleep_for(10ms);
  }
  for (auto& c : clients) c.join();
  const auto done = std::chrono::steady_clock::now();
  EXPECT_TRUE(mapped) << "no KV mapped while 8 requests ran";
  for (const StreamOutcome& o : outcomes) EXPECT_EQ(o.completion_tokens, 200);
  EXPECT_TRUE(metric_reaches(port, "gpufrac:kv_cache_mapped_bytes", 0)) << serve.log();
  // 200 ms, not the default 2 s (a wide bound: the machine may be busy).
  EXPECT_LT(std::chrono::steady_clock::now() - done, 1500ms);
  EXPECT_EQ(scrape(port, "vllm:num_preemptions_total"), 0);
  EXPECT_EQ(serve.terminate(), 0) << serve.log();
}

// Runs `gpufrac bench` against the server; returns its summary.json aggregate (null when it wrote
// none). Its exit status is not checked: bench fails when no request completed, which the timeout
// run below wants.
Json run_bench(int port, const std::string& out, int concurrency, int requests, int osl,
               const std::string& timeout = "600") {
  std::string command = std::string(std::getenv("GPUFRAC_BIN")) +
                        " bench --target http://127.0.0.1:" + std::to_string(port) +
                        " --isl 64 --osl " + std::to_string(osl) + " --concurrency " +
                        std::to_string(concurrency) + " --requests " + std::to_string(requests) +
                        " --warmup 0 --request-timeout " + timeout + " --no-progress --out " + out +
                        " > " + out + ".log 2>&1";
  std::filesystem::remove_all(out);
  (void)std::system(command.c_str());
  std::ifstream summary(out + "/dedicated-m1/c" + std::to_string(concurrency) + "/summary.json");
  Json parsed = Json::parse(summary, nullptr, false);
  return parsed.is_discarded() ? Json(nullptr) : parsed["aggregate"];
}

TEST(SERVE_SUITE, AnswersGpufracBenchAtConcurrency1To256WithoutLeaks) {
  int port = free_port();
  ServeProcess serve({"--model", SERVE_MODEL, "--device", SERVE_DEVICE, "--port",
                      std::to_string(port), "--max-model-len", "4096", "--memory-budget",
                      SERVE_MEMORY_BUDGET, "--max-num-seqs", "256", "--threads", "2"});
  ASSERT_TRUE(serve.wait_healthy(port, 300s)) << serve.log();
  std::string out = "/tmp/gpufrac-serve-bench-" + std::to_string(::getpid());
  for (auto [concurrency, requests] : {std::pair{1, 4}, {8, 16}, {64, 64}, {256, 256}}) {
    Json aggregate = run_bench(port, out, concurrency, requests, 16);
    ASSERT_TRUE(aggregate.is_object()) << "bench failed at concurrency " << concurrency;
    EXPECT_EQ(aggregate["completed"], requests) << aggregate.dump();
    EXPECT_EQ(aggregate["failed"], 0) << aggregate.dump();
    EXPECT_EQ(aggregate["output_token_mismatches"], 0) << aggregate.dump();
    EXPECT_TRUE(metric_reaches(port, "gpufrac:kv_cache_blocks_used", 0)) << concurrency;
  }
  // Requests of 4000 tokens that bench gives up on after 2 s: it disconnects, the server cancels.
  double aborted_before = scrape(port, "vllm:request_success_total{model_name=\"" SERVE_MODEL
                                       "\",engine=\"0\",finished_reason=\"abort\"}");
  Json timed_out = run_bench(port, out, 32, 32, 4000, "2");
  ASSERT_TRUE(timed_out.is_object());
  EXPECT_EQ(timed_out["failed"], 32) << timed_out.dump();
  EXPECT_TRUE(metric_reaches(port, "gpufrac:kv_cache_blocks_used", 0));
  EXPECT_EQ(scrape(port, "vllm:num_requests_running"), 0);
  EXPECT_EQ(scrape(port, "vllm:request_success_total{model_name=\"" SERVE_MODEL
                         "\",engine=\"0\",finished_reason=\"abort\"}"),
            aborted_before + 32);
  std::filesystem::remove_all(out);
  EXPECT_EQ(serve.terminate(), 0) << serve.log();
}

// A step budget too small for one token per running sequence is a flag error naming both flags,
// before any model is loaded.
TEST(SERVE_SUITE, StepBudgetsBelowMaxNumSeqsAreOneLineErrors) {
  for (const char* flag : {"--max-num-batched-tokens", "--max-tokens-with-decodes"}) {
    ServeProcess serve({"--model", SERVE_MODEL, "--device", SERVE_DEVICE, "--port",
                        std::to_string(free_port()), "--max-num-seqs", "64", flag, "32"});
    EXPECT_EQ(serve.wait_exit(), 2) << serve.log();
    EXPECT_NE(serve.log().find(std::string(flag) + " (32) must be at least --max-num-seqs (64)"),
              std::string::npos)
        << serve.log();
  }
}

// --kv-map-lock orders elastic KV mapping: without --memory-budget elastic it is a flag error.
TEST(SERVE_SUITE, AKvMapLockWithoutElasticKvIsAOneLineError) {
  ServeProcess serve({"--model", SERVE_MODEL, "--device", SERVE_DEVICE, "--port",
                      std::to_string(free_port()), "--kv-map-lock", "/tmp/kv-map.lock"});
  EXPECT_EQ(serve.wait_exit(), 2) << serve.log();
  EXPECT_NE(serve.log().find("--kv-map-lock orders the mapping of elastic KV memory"),
            std::string::npos)
      << serve.log();
}

}  // namespace
}  // namespace gpufrac::testing
