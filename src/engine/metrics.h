// EngineMetrics: what `/metrics` exposes, in Prometheus text format with vLLM-style names under
// the `gpufrac:` prefix (gpufrac:time_to_first_token_seconds, gpufrac:num_requests_running,
// gpufrac:kv_cache_blocks_used, ...), each labelled with model_name.
//
// The engine loop writes, HTTP threads read: every field is atomic, so observing and rendering
// need no lock (a scrape may see one step's update half applied, as Prometheus allows).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gpufrac::engine {

// A cumulative-bucket histogram of seconds.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double seconds);
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }
  // Appends "# HELP", "# TYPE", the _bucket lines (with le="+Inf"), _sum and _count.
  void render(std::string& out, std::string_view name, std::string_view help,
              std::string_view labels) const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // per bound, not cumulative; last = +Inf
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

struct EngineMetrics {
  EngineMetrics();

  Histogram time_to_first_token;  // arrival -> first generated token
  Histogram inter_token_latency;  // between consecutive tokens of a request
  Histogram e2e_request_latency;  // arrival -> finish

  std::atomic<int64_t> num_requests_running{0};
  std::atomic<int64_t> num_requests_waiting{0};
  std::atomic<int64_t> kv_cache_blocks_used{0};
  std::atomic<int64_t> kv_cache_blocks_total{0};

  std::atomic<uint64_t> prompt_tokens_total{0};      // counted once per request, at its first token
  std::atomic<uint64_t> generation_tokens_total{0};
  std::atomic<uint64_t> num_preemptions_total{0};
  std::atomic<uint64_t> requests_finished_stop{0};
  std::atomic<uint64_t> requests_finished_length{0};
  std::atomic<uint64_t> requests_finished_abort{0};
  std::atomic<uint64_t> requests_finished_error{0};
  std::atomic<uint64_t> requests_rejected_total{0};  // turned away: waiting queue full

  std::string render_prometheus(std::string_view model_name) const;
};

}  // namespace gpufrac::engine
