#include "engine/metrics.h"

#include <algorithm>
#include <cstdio>

namespace gpufrac::engine {

namespace {

// Decode steps are milliseconds on a GPU and tens of milliseconds on a CPU: dense below 100 ms.
const std::vector<double> kInterTokenBuckets = {0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02,
                                                0.025, 0.03,   0.04,  0.05,   0.075, 0.1,  0.15,
                                                0.2,   0.3,    0.4,   0.5,    0.75,  1.0,  2.5,
                                                5.0,   10.0};
const std::vector<double> kFirstTokenBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                                0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0,
                                                20.0,  40.0,  80.0, 160.0, 640.0};
const std::vector<double> kRequestBuckets = {0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,  5.0,
                                             10.0, 15.0, 20.0, 30.0, 40.0, 50.0,  60.0, 120.0,
                                             240.0, 480.0, 960.0, 1920.0};

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void append_with_le(std::string& out, std::string_view name, std::string_view labels,
                    std::string_view le, uint64_t value) {
  out.append(name).append("_bucket{").append(labels);
  if (!labels.empty()) out.append(",");
  out.append("le=\"").append(le).append("\"} ").append(std::to_string(value)).append("\n");
}

template <typename T>
void append_scalar(std::string& out, std::string_view name, std::string_view type,
                   std::string_view help, std::string_view labels, T value) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
  out.append(name).append("{").append(labels).append("} ").append(std::to_string(value));
  out.append("\n");
}

// Prometheus label values escape backslash, double quote and newline.
std::string label_value(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out.append("\\n");
      continue;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      buckets_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {}

void Histogram::observe(double seconds) {
  size_t b = std::lower_bound(bounds_.begin(), bounds_.end(), seconds) - bounds_.begin();
  buckets_[b].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(seconds, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

void Histogram::render(std::string& out, std::string_view name, std::string_view help,
                       std::string_view labels) const {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" histogram\n");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    append_with_le(out, name, labels, number(bounds_[i]), cumulative);
  }
  cumulative += buckets_[bounds_.size()].load(std::memory_order_relaxed);
  append_with_le(out, name, labels, "+Inf", cumulative);
  out.append(name).append("_sum{").append(labels).append("} ").append(number(sum()));
  out.append("\n");
  // _count equals the +Inf bucket in the same scrape, even while observe() runs concurrently.
  out.append(name).append("_count{").append(labels).append("} ");
  out.append(std::to_string(cumulative)).append("\n");
}

EngineMetrics::EngineMetrics()
    : time_to_first_token(kFirstTokenBuckets),
      inter_token_latency(kInterTokenBuckets),
      e2e_request_latency(kRequestBuckets) {}

std::string EngineMetrics::render_prometheus(std::string_view model_name) const {
  std::string labels = "model_name=\"" + label_value(model_name) + "\"";
  std::string out;
  out.reserve(8192);
  append_scalar(out, "gpufrac:num_requests_running", "gauge",
                "Requests in the running batch (prefilling or decoding).", labels,
                num_requests_running.load());
  append_scalar(out, "gpufrac:num_requests_waiting", "gauge",
                "Requests waiting for a sequence slot or KV blocks (preempted ones included).",
                labels, num_requests_waiting.load());
  append_scalar(out, "gpufrac:kv_cache_blocks_used", "gauge", "KV cache blocks held by requests.",
                labels, kv_cache_blocks_used.load());
  append_scalar(out, "gpufrac:kv_cache_blocks_total", "gauge", "KV cache blocks in the pool.",
                labels, kv_cache_blocks_total.load());
  int64_t total = kv_cache_blocks_total.load();
  double usage = total > 0 ? double(kv_cache_blocks_used.load()) / double(total) : 0.0;
  out.append("# HELP gpufrac:kv_cache_usage_perc KV cache usage, 1 = full.\n");
  out.append("# TYPE gpufrac:kv_cache_usage_perc gauge\n");
  out.append("gpufrac:kv_cache_usage_perc{").append(labels).append("} ").append(number(usage));
  out.append("\n");
  append_scalar(out, "gpufrac:prompt_tokens_total", "counter", "Prefilled prompt tokens.", labels,
                prompt_tokens_total.load());
  append_scalar(out, "gpufrac:generation_tokens_total", "counter", "Generated tokens.", labels,
                generation_tokens_total.load());
  append_scalar(out, "gpufrac:num_preemptions_total", "counter",
                "Preemptions by recompute (a request's KV blocks freed to make room).", labels,
                num_preemptions_total.load());
  append_scalar(out, "gpufrac:num_requests_rejected_total", "counter",
                "Requests turned away because the waiting queue was full.", labels,
                requests_rejected_total.load());
  out.append("# HELP gpufrac:request_success_total Finished requests by finish reason.\n");
  out.append("# TYPE gpufrac:request_success_total counter\n");
  const std::pair<const char*, const std::atomic<uint64_t>*> reasons[] = {
      {"stop", &requests_finished_stop},
      {"length", &requests_finished_length},
      {"abort", &requests_finished_abort},
      {"error", &requests_finished_error}};
  for (const auto& [reason, counter] : reasons) {
    out.append("gpufrac:request_success_total{").append(labels);
    out.append(",finished_reason=\"").append(reason).append("\"} ");
    out.append(std::to_string(counter->load())).append("\n");
  }
  time_to_first_token.render(out, "gpufrac:time_to_first_token_seconds",
                             "Time to first token, from arrival.", labels);
  inter_token_latency.render(out, "gpufrac:inter_token_latency_seconds",
                             "Time between consecutive output tokens of a request.", labels);
  e2e_request_latency.render(out, "gpufrac:e2e_request_latency_seconds",
                             "Request latency from arrival to finish.", labels);
  return out;
}

}  // namespace gpufrac::engine
