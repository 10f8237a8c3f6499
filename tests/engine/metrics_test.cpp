// EngineMetrics and Histogram without an engine: cumulative buckets, bounds printed as vLLM prints
// them, and one request's stage times (given, not measured) in vLLM's per-request histograms.
#include "engine/metrics.h"

#include <gtest/gtest.h>

#include "common/strings.h"
#include "server_test_client.h"

namespace gpufrac::testing {
namespace {

using engine::EngineMetrics;
using engine::FinishReason;
using engine::Histogram;
using engine::RequestTimes;

constexpr int64_t kMs = 1'000'000;  // ns

const engine::EngineMetricsShape kShape = {
    .max_model_len = 128, .block_size = 16, .num_kv_blocks = 64};

// The sample `name{model_name="m",engine="0"[,extra]}`, as metric_value reads it.
double sample(const std::string& text, const std::string& name, const std::string& extra = "") {
  std::string labels = "model_name=\"m\",engine=\"0\"" + (extra.empty() ? "" : "," + extra);
  return metric_value(text, name + "{" + labels + "}");
}

double bucket(const std::string& text, const std::string& histogram, const std::string& le) {
  return sample(text, histogram + "_bucket", "le=\"" + le + "\"");
}

TEST(Histogram, BucketsAreCumulativeAndAValueOnABoundCountsInIt) {
  Histogram h({0.01, 0.025, 0.05});
  for (double v : {0.005, 0.01, 0.02, 0.03, 10.0}) h.observe(v);
  std::string out;
  h.render(out, "x_seconds", "A test histogram.", "model_name=\"m\",engine=\"0\"");
  EXPECT_NE(out.find("# TYPE x_seconds histogram\n"), std::string::npos) << out;
  EXPECT_EQ(bucket(out, "x_seconds", "0.01"), 2) << out;
  EXPECT_EQ(bucket(out, "x_seconds", "0.025"), 3);
  EXPECT_EQ(bucket(out, "x_seconds", "0.05"), 4);
  EXPECT_EQ(bucket(out, "x_seconds", "+Inf"), 5);
  EXPECT_EQ(sample(out, "x_seconds_count"), 5);
  EXPECT_NEAR(sample(out, "x_seconds_sum"), 10.065, 1e-12);
}

TEST(EngineMetrics, BucketBoundsPrintShortAsVllmPrintsThem) {
  EngineMetrics metrics(kShape);
  std::string out = metrics.render_prometheus("m");
  EXPECT_EQ(bucket(out, "vllm:time_to_first_token_seconds", "0.001"), 0) << out;
  EXPECT_EQ(bucket(out, "vllm:time_to_first_token_seconds", "2560.0"), 0);
  EXPECT_EQ(bucket(out, "vllm:inter_token_latency_seconds", "0.075"), 0);
  EXPECT_EQ(bucket(out, "vllm:e2e_request_latency_seconds", "0.3"), 0);
  EXPECT_EQ(bucket(out, "vllm:e2e_request_latency_seconds", "7680.0"), 0);
  EXPECT_EQ(bucket(out, "gpufrac:inter_token_latency_seconds", "0.0005"), 0);
  // Token counts: 1, 2, 5, 10, ... up to max_model_len (128).
  EXPECT_EQ(bucket(out, "vllm:request_prompt_tokens", "1.0"), 0);
  EXPECT_EQ(bucket(out, "vllm:request_prompt_tokens", "100.0"), 0);
  EXPECT_EQ(bucket(out, "vllm:request_prompt_tokens", "200.0"), -1) << "past max_model_len";
  int bounds = 0;
  for (const std::string& line : split(out, '\n')) {
    size_t at = line.find("le=\"");
    if (at == std::string::npos) continue;
    std::string le = line.substr(at + 4, line.find('"', at + 4) - at - 4);
    EXPECT_LE(le.size(), 6u) << line;  // e.g. not "0.0050000000000000001"
    if (le != "+Inf") {
      EXPECT_NE(le.find('.'), std::string::npos) << line;  // whole numbers as "1.0"
    }
    ++bounds;
  }
  EXPECT_GT(bounds, 200);
}

TEST(EngineMetrics, GaugesAndCacheConfig) {
  EngineMetrics metrics(kShape);
  metrics.kv_cache_blocks_used = 16;
  metrics.num_requests_running = 3;
  std::string out = metrics.render_prometheus("m");
  EXPECT_EQ(sample(out, "vllm:kv_cache_usage_perc"), 0.25) << out;
  EXPECT_EQ(sample(out, "vllm:num_requests_running"), 3);
  EXPECT_EQ(sample(out, "gpufrac:kv_cache_blocks_used"), 16);
  EXPECT_EQ(sample(out, "gpufrac:kv_cache_blocks_capacity"), 64);
  EXPECT_EQ(sample(out, "vllm:cache_config_info", "block_size=\"16\",num_gpu_blocks=\"64\""), 1);
}

TEST(EngineMetrics, OneRequestsStagesLandInVllmsHistograms) {
  EngineMetrics metrics(kShape);
  RequestTimes times{.arrival_ns = 1000 * kMs};
  metrics.observe_scheduled(times, 1200 * kMs);
  metrics.observe_scheduled(times, 1300 * kMs);  // a recompute: the first time stays
  for (int64_t at : {1700 * kMs, 1702 * kMs + 800'000, 1705 * kMs + 600'000}) {
    metrics.observe_token(times, 7, at);  // 2.8 ms apart
  }
  metrics.observe_finish(times, {FinishReason::kLength, 7, 3, 3}, 1706 * kMs);
  // Cancelled while waiting: only what a request that never ran has.
  RequestTimes waited{.arrival_ns = 2000 * kMs};
  metrics.observe_finish(waited, {FinishReason::kCancelled, 5, 0, 16}, 2100 * kMs);

  std::string out = metrics.render_prometheus("m");
  EXPECT_NEAR(sample(out, "vllm:time_to_first_token_seconds_sum"), 0.7, 1e-9) << out;
  EXPECT_NEAR(sample(out, "vllm:request_queue_time_seconds_sum"), 0.2, 1e-9);
  EXPECT_NEAR(sample(out, "vllm:request_prefill_time_seconds_sum"), 0.5, 1e-9);
  EXPECT_NEAR(sample(out, "vllm:request_decode_time_seconds_sum"), 0.0056, 1e-9);
  EXPECT_NEAR(sample(out, "vllm:request_inference_time_seconds_sum"), 0.5056, 1e-9);
  EXPECT_NEAR(sample(out, "vllm:request_time_per_output_token_seconds_sum"), 0.0028, 1e-9);
  EXPECT_NEAR(sample(out, "vllm:e2e_request_latency_seconds_sum"), 0.706 + 0.1, 1e-9);
  EXPECT_EQ(sample(out, "vllm:e2e_request_latency_seconds_count"), 2);
  EXPECT_EQ(sample(out, "vllm:request_queue_time_seconds_count"), 1);
  EXPECT_EQ(sample(out, "vllm:request_prefill_time_seconds_count"), 1);

  // vLLM's first ITL bucket holds both gaps; gpufrac's finer one tells 2.8 ms from 2.5 ms.
  EXPECT_EQ(bucket(out, "vllm:inter_token_latency_seconds", "0.01"), 2);
  EXPECT_EQ(bucket(out, "gpufrac:inter_token_latency_seconds", "0.0025"), 0);
  EXPECT_EQ(bucket(out, "gpufrac:inter_token_latency_seconds", "0.003"), 2);
  EXPECT_EQ(bucket(out, "gpufrac:request_time_per_output_token_seconds", "0.003"), 1);

  EXPECT_EQ(sample(out, "vllm:prompt_tokens_total"), 7);
  EXPECT_EQ(sample(out, "vllm:generation_tokens_total"), 3);
  EXPECT_EQ(bucket(out, "vllm:request_prompt_tokens", "5.0"), 1);  // the cancelled one's 5
  EXPECT_EQ(bucket(out, "vllm:request_prompt_tokens", "10.0"), 2);
  EXPECT_EQ(sample(out, "vllm:request_generation_tokens_sum"), 3);
  EXPECT_EQ(sample(out, "vllm:request_max_num_generation_tokens_sum"), 3);
  EXPECT_EQ(sample(out, "vllm:request_params_max_tokens_sum"), 19);
  EXPECT_EQ(sample(out, "vllm:request_success_total", "finished_reason=\"length\""), 1);
  EXPECT_EQ(sample(out, "vllm:request_success_total", "finished_reason=\"abort\""), 1);
  EXPECT_EQ(sample(out, "vllm:request_success_total", "finished_reason=\"stop\""), 0);
  EXPECT_EQ(sample(out, "vllm:request_success_total", "finished_reason=\"error\""), 0);
}

}  // namespace
}  // namespace gpufrac::testing
