// One run point as `gpufrac report` sees it: the configuration and aggregate numbers of one
// summary.json (docs/result-format.md), and the scan that finds them under result directories.
//
// Units: throughput in output tokens/s (requests/s) for the whole run (all its GPUs), latencies
// in ms. Tail percentiles (TTFT p90/p99, ITL p90) follow the study's convention for p50: the mean
// over the run's targets (models) of each target's percentile, from targets[].metrics; missing
// when the summary has no targets or any target lacks the value.
// A metric the summary leaves out or sets to null is std::nullopt and prints as "—"; a missing or
// malformed configuration field is a UsageError naming the file and the field. Plain values, no
// shared state.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/json.h"

namespace gpufrac {

struct RunPoint {
  std::string path;  // the summary.json this came from
  std::string arm;   // "dedicated" | "timeslice" | "fractions"
  int models_per_gpu = 1;
  int gpus = 1;
  bool closed_loop = true;
  std::optional<int> concurrency;      // per model; required for closed loop
  std::optional<double> request_rate;  // per model, requests/s; required for open loop
  std::optional<double> output_tok_s;  // aggregate.output_token_throughput
  std::optional<double> ttft_p50_ms;   // mean of the per-model p50s
  std::optional<double> itl_p50_ms;
  std::optional<double> pooled_ttft_p50_ms;  // p50 over all models' requests together
  std::optional<double> pooled_itl_p50_ms;
  std::optional<double> ttft_p90_ms;         // mean of the per-model p90s
  std::optional<double> ttft_p99_ms;         // mean of the per-model p99s
  std::optional<double> itl_p90_ms;          // mean of the per-model p90s
  std::optional<double> request_throughput;  // aggregate.request_throughput, all models
  std::optional<double> completed;
  std::optional<double> failed;
  std::string gpu_name;  // machine.gpu, empty when absent

  int models() const { return models_per_gpu * gpus; }
  std::optional<double> tok_s_per_gpu() const;
  // Requests resident per GPU in a closed loop: models_per_gpu x concurrency.
  int requests_per_gpu() const { return models_per_gpu * concurrency.value_or(0); }
};

// Reads one summary (already parsed); `path` names it in errors.
RunPoint run_point_from_summary(const Json& summary, const std::string& path);
RunPoint read_run_point(const std::string& summary_path);

// Every summary.json under each path (a directory, searched recursively, or a summary.json
// itself), each file once, in path order. A path that does not exist or holds no summary is a
// UsageError.
std::vector<RunPoint> find_run_points(const std::vector<std::string>& paths);

}  // namespace gpufrac
