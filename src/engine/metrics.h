// EngineMetrics: what `/metrics` of `gpufrac serve` exposes, in Prometheus text format (0.0.4).
//
// Series that vLLM has are under vLLM's names, types, labels (model_name, engine) and bucket
// boundaries (vllm:num_requests_running, vllm:time_to_first_token_seconds, ...), so dashboards and
// alerts written for vLLM read gpufrac unchanged. What vLLM has no series for (KV blocks, rejected
// requests) and histograms finer than vLLM's where our latencies sit below its first bucket are
// under `gpufrac:`. docs/serve.md ("Metrics") lists every series.
//
// Times are monotonic_ns() values (common/clock.h); time histograms are in seconds. Bucket bounds
// print as Python's prometheus_client prints them: the shortest exact decimal, "0.005", "1.0".
//
// Threads: the engine loop observes and sets, HTTP threads render. Every field is atomic, so
// neither needs a lock (a scrape may see one step's update half applied, as Prometheus allows).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sequence.h"

namespace gpufrac::engine {

// A cumulative-bucket histogram of values (seconds or token counts).
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }
  // Appends "# HELP", "# TYPE", the _bucket lines (le="+Inf" last), _sum and _count. `labels` is
  // the label list without braces, non-empty.
  void render(std::string& out, std::string_view name, std::string_view help,
              std::string_view labels) const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // per bound, not cumulative; last = +Inf
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

// When one request reached each stage, in monotonic ns; 0 = not yet. Owned by the engine loop.
struct RequestTimes {
  int64_t arrival_ns = 0;      // submitted
  int64_t scheduled_ns = 0;    // first fed to a step (a preemption does not reset it)
  int64_t first_token_ns = 0;  // first generated token delivered
  int64_t last_token_ns = 0;   // latest generated token delivered
};

// A finished request's counts, for the per-request histograms.
struct FinishedRequest {
  FinishReason reason = FinishReason::kNone;
  int64_t prompt_tokens = 0;
  int64_t generation_tokens = 0;
  int64_t max_tokens = 0;  // the request's max_tokens
};

// What the token-count buckets and vllm:cache_config_info are built from.
struct EngineMetricsShape {
  int max_model_len = 0;
  int block_size = 0;
  int num_kv_blocks = 0;      // the pool's ceiling (elastic pools back part of it)
  uint64_t kv_block_bytes = 0;
};

struct EngineMetrics {
  explicit EngineMetrics(EngineMetricsShape shape);

  // The engine loop's observations of one request, in order; each reads `times` and updates it.
  void observe_scheduled(RequestTimes& times, int64_t now_ns);
  void observe_token(RequestTimes& times, int64_t prompt_tokens, int64_t now_ns);
  void observe_finish(const RequestTimes& times, const FinishedRequest& request, int64_t now_ns);

  std::string render_prometheus(std::string_view model_name) const;

  const EngineMetricsShape shape;

  // Set by the engine loop after every change.
  std::atomic<int64_t> num_requests_running{0};
  std::atomic<int64_t> num_requests_waiting{0};
  std::atomic<int64_t> kv_cache_blocks_used{0};
  std::atomic<int64_t> kv_cache_blocks_backed{0};  // with memory behind them
  // Elastic KV: the device had no memory, or another engine held the --kv-map-lock turn.
  std::atomic<uint64_t> kv_backing_refusals_total{0};
  std::atomic<uint64_t> num_preemptions_total{0};
  std::atomic<uint64_t> requests_rejected_total{0};  // turned away: waiting queue full

  // Kept by the observe_* calls.
  std::atomic<uint64_t> prompt_tokens_total{0};  // counted once per request, at its first token
  std::atomic<uint64_t> generation_tokens_total{0};
  std::atomic<uint64_t> requests_finished_stop{0};
  std::atomic<uint64_t> requests_finished_length{0};
  std::atomic<uint64_t> requests_finished_abort{0};
  std::atomic<uint64_t> requests_finished_error{0};

  // vLLM's histograms, with vLLM's buckets.
  Histogram time_to_first_token;            // arrival -> first token
  Histogram inter_token_latency;            // between consecutive tokens of a request
  Histogram e2e_request_latency;            // arrival -> finish
  Histogram request_queue_time;             // arrival -> first scheduled
  Histogram request_prefill_time;           // first scheduled -> first token
  Histogram request_decode_time;            // first token -> last token
  Histogram request_inference_time;         // first scheduled -> last token
  Histogram request_time_per_output_token;  // decode time / (generated tokens - 1)
  Histogram request_prompt_tokens;
  Histogram request_generation_tokens;
  Histogram request_max_num_generation_tokens;  // per request: its generated tokens
  Histogram request_params_max_tokens;

  // gpufrac's finer copies where vLLM's first bucket (10 ms) is wider than a GPU's decode step.
  Histogram fine_inter_token_latency;
  Histogram fine_request_time_per_output_token;
};

}  // namespace gpufrac::engine
