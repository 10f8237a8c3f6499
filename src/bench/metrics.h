// The metrics of a run point, exactly as docs/benchmark-metrics.md defines them,
// computed afterwards from raw request records (warmup records are skipped here):
//   TTFT = first content event - sent; request latency = last content event - sent;
//   ITL = (latency - TTFT) / (output tokens - 1) per request with >= 2 tokens (vLLM's TPOT);
//   inter-chunk gaps = every gap between consecutive content events, pooled (vLLM's "ITL");
//   duration = last response end - first request sent; throughputs = completed work / duration;
//   effective concurrency = time-weighted mean of requests in flight over that window.
// Latency distributions and token counts cover completed (status ok) requests; duration and
// effective concurrency cover every request that was sent. Times in ms, throughputs per second.
// Pure functions; thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "bench/request_record.h"
#include "bench/stats.h"
#include "common/json.h"

namespace gpufrac {

// The per-request distributions: latencies of completed requests and their token counts.
struct Distributions {
  Stats ttft_ms, itl_ms, request_latency_ms, inter_chunk_gap_ms, output_tokens, input_tokens;
};

struct TargetMetrics : Distributions {
  double output_token_throughput = 0;  // tokens/s
  double request_throughput = 0;       // requests/s
  double effective_concurrency = 0;
  double duration_s = 0;
  int64_t completed = 0;
  int64_t failed = 0;
  std::map<std::string, int64_t> errors;  // status name -> count (failed requests only)
  int64_t output_token_mismatches = 0;    // completed requests whose length != requested OSL
  int64_t input_token_mismatches = 0;     // ... whose usage.prompt_tokens != the ISL built
  int64_t total_input_tokens = 0;         // completed requests
  int64_t total_output_tokens = 0;
};

struct AggregateMetrics : Distributions {  // the distributions pooled over targets
  double output_token_throughput = 0;  // sum over targets
  double request_throughput = 0;       // sum over targets
  double effective_concurrency = 0;    // sum over targets
  double ttft_ms_p50 = 0;              // mean of the per-target p50s (the reference study's way)
  double itl_ms_p50 = 0;
  int64_t completed = 0, failed = 0, output_token_mismatches = 0, input_token_mismatches = 0;
  int64_t total_input_tokens = 0, total_output_tokens = 0;
  std::map<std::string, int64_t> errors;
  double duration_s = 0;  // the longest target's
};

// Metrics of one target from its records (any order; warmup records are ignored).
TargetMetrics compute_target_metrics(const std::vector<RequestRecord>& records);
// Aggregate over targets; `records` are all targets' records (for the pooled distributions).
AggregateMetrics aggregate_metrics(const std::vector<TargetMetrics>& targets,
                                   const std::vector<RequestRecord>& records);

Json target_metrics_to_json(const TargetMetrics& metrics);
Json aggregate_metrics_to_json(const AggregateMetrics& metrics);

}  // namespace gpufrac
