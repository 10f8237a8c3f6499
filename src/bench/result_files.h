// The files of one run point (docs/result-format.md, the contract with `gpufrac report`):
// records.jsonl, summary.json, summary.csv and profile_export_aiperf.json (AIPerf's summary
// layout, so plotting scripts written for AIPerf read our runs). Pure builders plus one writer;
// thread-safe.
#pragma once

#include <string>
#include <vector>

#include "bench/load_driver.h"
#include "bench/metrics.h"
#include "common/json.h"

namespace gpufrac {

// Everything a run point's files say.
struct PointResult {
  std::string directory;  // where the files went
  Json config;   // summary.json "config" (arm, models_per_gpu, gpus, load, concurrency, ...)
  Json machine;  // summary.json "machine"
  Json client;   // summary.json "client": bench's own CPU use
  std::vector<BenchTarget> targets;
  std::vector<TargetMetrics> target_metrics;  // one per target, same order
  AggregateMetrics aggregate;
  PointRun run;
};

Json summary_json(const PointResult& point);
std::string summary_csv(const PointResult& point);
Json aiperf_profile_json(const PointResult& point);

// Writes the four files into `dir` (created if needed). Throws RuntimeFailure naming the path.
void write_point_files(const std::string& dir, const PointResult& point);

// The host's NVIDIA GPU model and driver from /proc/driver/nvidia (null when there is none),
// the hostname and the current UTC time: summary.json "machine".
Json describe_machine();

}  // namespace gpufrac
