#include "bench/metrics.h"

#include <algorithm>
#include <limits>

#include "common/clock.h"

namespace gpufrac {
namespace {

struct Samples {
  std::vector<double> ttft_ms, itl_ms, latency_ms, gap_ms, output_tokens, input_tokens;
};

void add_samples(const RequestRecord& r, Samples& s) {
  if (r.warmup || !r.ok() || r.event_ns.empty()) return;
  double ttft = ns_to_ms(r.first_ns - r.sent_ns);
  double latency = ns_to_ms(r.last_ns - r.sent_ns);
  s.ttft_ms.push_back(ttft);
  s.latency_ms.push_back(latency);
  if (r.output_tokens >= 2) s.itl_ms.push_back((latency - ttft) / double(r.output_tokens - 1));
  for (size_t i = 1; i < r.event_ns.size(); ++i) {
    s.gap_ms.push_back(ns_to_ms(r.event_ns[i] - r.event_ns[i - 1]));
  }
  s.output_tokens.push_back(double(r.output_tokens));
  s.input_tokens.push_back(double(r.input_tokens));
}

Distributions distributions_of(Samples s) {
  return {compute_stats(std::move(s.ttft_ms)),    compute_stats(std::move(s.itl_ms)),
          compute_stats(std::move(s.latency_ms)), compute_stats(std::move(s.gap_ms)),
          compute_stats(std::move(s.output_tokens)), compute_stats(std::move(s.input_tokens))};
}

Json distributions_to_json(const Distributions& d) {
  return {{"ttft_ms", stats_to_json(d.ttft_ms)},
          {"itl_ms", stats_to_json(d.itl_ms)},
          {"request_latency_ms", stats_to_json(d.request_latency_ms)},
          {"inter_chunk_gap_ms", stats_to_json(d.inter_chunk_gap_ms)},
          {"output_tokens", stats_to_json(d.output_tokens)},
          {"input_tokens", stats_to_json(d.input_tokens)}};
}

}  // namespace

TargetMetrics compute_target_metrics(const std::vector<RequestRecord>& records) {
  TargetMetrics m;
  Samples samples;
  int64_t window_start = std::numeric_limits<int64_t>::max(), window_end = 0;
  int64_t busy_ns = 0;  // sum of every sent request's time in flight
  for (const RequestRecord& r : records) {
    if (r.warmup) continue;
    add_samples(r, samples);
    if (r.ok()) {
      ++m.completed;
      m.total_output_tokens += r.output_tokens;
      m.total_input_tokens += r.input_tokens;
      if (r.output_tokens != r.requested_output_tokens) ++m.output_token_mismatches;
      if (r.requested_input_tokens > 0 && r.input_tokens != r.requested_input_tokens) {
        ++m.input_token_mismatches;
      }
    } else {
      ++m.failed;
      ++m.errors[status_name(r.status)];
    }
    if (r.sent_ns == 0) continue;  // never reached the server: not in flight
    window_start = std::min(window_start, r.sent_ns);
    window_end = std::max(window_end, r.end_ns);
    busy_ns += r.end_ns - r.sent_ns;
  }
  if (window_end > window_start) {
    m.duration_s = double(window_end - window_start) / 1e9;
    m.output_token_throughput = double(m.total_output_tokens) / m.duration_s;
    m.request_throughput = double(m.completed) / m.duration_s;
    m.effective_concurrency = double(busy_ns) / double(window_end - window_start);
  }
  static_cast<Distributions&>(m) = distributions_of(std::move(samples));
  return m;
}

AggregateMetrics aggregate_metrics(const std::vector<TargetMetrics>& targets,
                                   const std::vector<RequestRecord>& records) {
  AggregateMetrics a;
  int with_ttft = 0, with_itl = 0;
  for (const TargetMetrics& t : targets) {
    a.output_token_throughput += t.output_token_throughput;
    a.request_throughput += t.request_throughput;
    a.effective_concurrency += t.effective_concurrency;
    a.completed += t.completed;
    a.failed += t.failed;
    a.output_token_mismatches += t.output_token_mismatches;
    a.input_token_mismatches += t.input_token_mismatches;
    a.total_input_tokens += t.total_input_tokens;
    a.total_output_tokens += t.total_output_tokens;
    for (const auto& [status, count] : t.errors) a.errors[status] += count;
    a.duration_s = std::max(a.duration_s, t.duration_s);
    if (t.ttft_ms.count) {
      a.ttft_ms_p50 += t.ttft_ms.p50();
      ++with_ttft;
    }
    if (t.itl_ms.count) {
      a.itl_ms_p50 += t.itl_ms.p50();
      ++with_itl;
    }
  }
  if (with_ttft) a.ttft_ms_p50 /= with_ttft;
  if (with_itl) a.itl_ms_p50 /= with_itl;
  Samples pooled;
  for (const RequestRecord& r : records) add_samples(r, pooled);
  static_cast<Distributions&>(a) = distributions_of(std::move(pooled));
  return a;
}

Json target_metrics_to_json(const TargetMetrics& m) {
  Json j = distributions_to_json(m);
  j["output_token_throughput"] = m.output_token_throughput;
  j["request_throughput"] = m.request_throughput;
  j["effective_concurrency"] = m.effective_concurrency;
  j["duration_s"] = m.duration_s;
  j["completed"] = m.completed;
  j["failed"] = m.failed;
  j["errors"] = m.errors;
  j["output_token_mismatches"] = m.output_token_mismatches;
  j["input_token_mismatches"] = m.input_token_mismatches;
  j["total_input_tokens"] = m.total_input_tokens;
  j["total_output_tokens"] = m.total_output_tokens;
  return j;
}

Json aggregate_metrics_to_json(const AggregateMetrics& a) {
  Json j;
  j["output_token_throughput"] = a.output_token_throughput;
  j["request_throughput"] = a.request_throughput;
  j["effective_concurrency"] = a.effective_concurrency;
  auto p50 = [](double v, const Stats& s) { return s.count ? Json(v) : Json(nullptr); };
  j["ttft_ms_p50"] = p50(a.ttft_ms_p50, a.ttft_ms);
  j["itl_ms_p50"] = p50(a.itl_ms_p50, a.itl_ms);
  j["pooled"] = distributions_to_json(a);
  j["completed"] = a.completed;
  j["failed"] = a.failed;
  j["errors"] = a.errors;
  j["output_token_mismatches"] = a.output_token_mismatches;
  j["input_token_mismatches"] = a.input_token_mismatches;
  j["total_input_tokens"] = a.total_input_tokens;
  j["total_output_tokens"] = a.total_output_tokens;
  j["duration_s"] = a.duration_s;
  return j;
}

}  // namespace gpufrac
