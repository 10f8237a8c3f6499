// Metrics from hand-made records: every number below is worked out by hand from the timestamps.
#include "bench/metrics.h"

#include <gtest/gtest.h>

namespace gpufrac {
namespace {

constexpr int64_t kMs = 1'000'000;

constexpr int64_t kEpoch = 1'000 * kMs;  // monotonic time 0 means "never": start elsewhere

// A completed request sent at `sent_ms` whose content events arrive at `events_ms`.
RequestRecord ok_record(int64_t sent_ms, std::vector<int64_t> events_ms, int64_t tokens,
                        int64_t asked = -1) {
  RequestRecord r;
  r.sent_ns = r.scheduled_ns = kEpoch + sent_ms * kMs;
  for (int64_t e : events_ms) r.event_ns.push_back(kEpoch + e * kMs);
  r.first_ns = r.event_ns.front();
  r.last_ns = r.event_ns.back();
  r.end_ns = r.last_ns + 1 * kMs;  // [DONE] and the end of the reply 1 ms after the last token
  r.output_tokens = tokens;
  r.output_tokens_from_usage = true;
  r.requested_output_tokens = asked < 0 ? tokens : asked;
  r.input_tokens = 100;
  return r;
}

TEST(Metrics, DefinitionsOnTwoRequests) {
  std::vector<RequestRecord> records = {
      ok_record(0, {50, 60, 70, 80, 90}, 5),  // TTFT 50, latency 90, ITL 40/4 = 10
      ok_record(10, {40, 60, 80}, 3),         // TTFT 30, latency 70, ITL 40/2 = 20
  };
  TargetMetrics m = compute_target_metrics(records);
  EXPECT_EQ(m.completed, 2);
  EXPECT_EQ(m.failed, 0);
  EXPECT_DOUBLE_EQ(m.ttft_ms.p50(), 40);  // (30 + 50) / 2
  EXPECT_DOUBLE_EQ(m.itl_ms.p50(), 15);
  EXPECT_DOUBLE_EQ(m.request_latency_ms.p50(), 80);
  // gaps: 10,10,10,10 and 20,20 -> sorted 10,10,10,10,20,20; p50 at rank 2.5 -> 10
  EXPECT_EQ(m.inter_chunk_gap_ms.count, 6u);
  EXPECT_DOUBLE_EQ(m.inter_chunk_gap_ms.p50(), 10);
  EXPECT_DOUBLE_EQ(m.inter_chunk_gap_ms.max, 20);
  // window: first sent 0 ms .. last end 91 ms
  EXPECT_DOUBLE_EQ(m.duration_s, 0.091);
  EXPECT_DOUBLE_EQ(m.output_token_throughput, 8 / 0.091);
  EXPECT_DOUBLE_EQ(m.request_throughput, 2 / 0.091);
  // in flight: 0..91 (91 ms) and 10..81 (71 ms) -> 162 / 91
  EXPECT_DOUBLE_EQ(m.effective_concurrency, 162.0 / 91.0);
  EXPECT_EQ(m.total_output_tokens, 8);
  EXPECT_EQ(m.output_token_mismatches, 0);
}

TEST(Metrics, SeveralTokensPerChunkDoNotInflateItl) {
  // 16 tokens in 4 chunks of 4, chunks 40 ms apart: ITL = (120) / 15 = 8 ms, gaps 40 ms.
  TargetMetrics m = compute_target_metrics({ok_record(0, {100, 140, 180, 220}, 16)});
  EXPECT_DOUBLE_EQ(m.itl_ms.p50(), 8);
  EXPECT_DOUBLE_EQ(m.inter_chunk_gap_ms.p50(), 40);
  EXPECT_DOUBLE_EQ(m.output_tokens.p50(), 16);
}

TEST(Metrics, OneTokenRequestsHaveNoItl) {
  TargetMetrics m = compute_target_metrics({ok_record(0, {30}, 1)});
  EXPECT_EQ(m.ttft_ms.count, 1u);
  EXPECT_EQ(m.itl_ms.count, 0u);
  EXPECT_EQ(m.inter_chunk_gap_ms.count, 0u);
}

TEST(Metrics, WarmupIsExcludedAndFailuresAreCounted) {
  RequestRecord warm = ok_record(0, {10, 20}, 2);
  warm.warmup = true;
  RequestRecord timed_out;
  timed_out.status = RequestStatus::kTimeout;
  timed_out.sent_ns = kEpoch + 100 * kMs;
  timed_out.end_ns = kEpoch + 400 * kMs;
  RequestRecord refused;
  refused.status = RequestStatus::kConnectionError;  // never sent: not in flight
  RequestRecord http;
  http.status = RequestStatus::kHttpError;
  http.sent_ns = kEpoch + 110 * kMs;
  http.end_ns = kEpoch + 111 * kMs;
  TargetMetrics m =
      compute_target_metrics({warm, ok_record(100, {150, 160}, 2), timed_out, refused, http});
  EXPECT_EQ(m.completed, 1);
  EXPECT_EQ(m.failed, 3);
  EXPECT_EQ(m.errors.at("timeout"), 1);
  EXPECT_EQ(m.errors.at("connection_error"), 1);
  EXPECT_EQ(m.errors.at("http_error"), 1);
  EXPECT_EQ(m.ttft_ms.count, 1u);
  EXPECT_DOUBLE_EQ(m.ttft_ms.p50(), 50);
  // window 100 .. 400 ms: the timeout counts for duration and concurrency, not for latency
  EXPECT_DOUBLE_EQ(m.duration_s, 0.3);
  EXPECT_DOUBLE_EQ(m.output_token_throughput, 2 / 0.3);
  EXPECT_DOUBLE_EQ(m.effective_concurrency, (61.0 + 300.0 + 1.0) / 300.0);
}

TEST(Metrics, ShortOutputsAreMismatches) {
  TargetMetrics m =
      compute_target_metrics({ok_record(0, {10, 20}, 2, 8), ok_record(0, {10, 20}, 8, 8)});
  EXPECT_EQ(m.output_token_mismatches, 1);
}

TEST(Metrics, PromptsCountedOtherwiseAreInputMismatches) {
  RequestRecord exact = ok_record(0, {10, 20}, 2), other = exact, unbuilt = exact;
  exact.requested_input_tokens = 100;  // ok_record's usage.prompt_tokens is 100
  other.requested_input_tokens = 96;
  unbuilt.requested_input_tokens = 0;  // no length asked for: nothing to compare
  TargetMetrics m = compute_target_metrics({exact, other, unbuilt});
  EXPECT_EQ(m.input_token_mismatches, 1);
  AggregateMetrics a = aggregate_metrics({m, m}, {});
  EXPECT_EQ(a.input_token_mismatches, 2);
  EXPECT_EQ(aggregate_metrics_to_json(a)["input_token_mismatches"], 2);
}

TEST(Metrics, AggregateSumsThroughputAndAveragesP50s) {
  std::vector<RequestRecord> a = {ok_record(0, {10, 20, 30}, 3), ok_record(0, {20, 30, 40}, 3)};
  std::vector<RequestRecord> b = {ok_record(0, {100, 200}, 2)};
  for (auto& r : b) r.target = 1;
  TargetMetrics ma = compute_target_metrics(a), mb = compute_target_metrics(b);
  std::vector<RequestRecord> all = a;
  all.insert(all.end(), b.begin(), b.end());
  AggregateMetrics g = aggregate_metrics({ma, mb}, all);
  EXPECT_DOUBLE_EQ(g.output_token_throughput,
                   ma.output_token_throughput + mb.output_token_throughput);
  EXPECT_DOUBLE_EQ(g.request_throughput, ma.request_throughput + mb.request_throughput);
  // per-target TTFT p50: a -> 15, b -> 100; mean 57.5. Pooled 10, 20, 100 -> p50 20.
  EXPECT_DOUBLE_EQ(g.ttft_ms_p50, 57.5);
  EXPECT_DOUBLE_EQ(g.ttft_ms.p50(), 20);
  // ITL: a -> 10, 10; b -> 100. Mean of p50s 55, pooled p50 10.
  EXPECT_DOUBLE_EQ(g.itl_ms_p50, 55);
  EXPECT_DOUBLE_EQ(g.itl_ms.p50(), 10);
  EXPECT_EQ(g.completed, 3);
  EXPECT_DOUBLE_EQ(g.duration_s, std::max(ma.duration_s, mb.duration_s));
  Json j = aggregate_metrics_to_json(g);
  for (const char* key : {"output_token_throughput", "request_throughput", "ttft_ms_p50",
                          "itl_ms_p50", "pooled", "completed", "failed", "duration_s"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_DOUBLE_EQ(j["pooled"]["ttft_ms"]["p50"].get<double>(), 20);
}

TEST(Metrics, NothingCompletedGivesZerosAndNulls) {
  RequestRecord failed;
  failed.status = RequestStatus::kStreamError;
  TargetMetrics m = compute_target_metrics({failed});
  EXPECT_EQ(m.completed, 0);
  EXPECT_EQ(m.output_token_throughput, 0);
  Json j = target_metrics_to_json(m);
  EXPECT_TRUE(j["ttft_ms"]["p50"].is_null());
  AggregateMetrics g = aggregate_metrics({m}, {failed});
  EXPECT_TRUE(aggregate_metrics_to_json(g)["ttft_ms_p50"].is_null());
}

}  // namespace
}  // namespace gpufrac
