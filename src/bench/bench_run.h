// A whole `gpufrac bench` run: the sweep of run points (closed-loop concurrencies or open-loop
// rates), each driven, measured, written to its directory and summarised. The library entry
// point for callers other than the CLI (`gpufrac experiment` drives bench through it).
//
// Directories: <out>/<arm>-m<models_per_gpu>/c<concurrency>/ (closed loop) or .../r<rate>/
// (open loop), files as in docs/result-format.md. Runs on the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/load_driver.h"
#include "bench/result_files.h"
#include "bench/workload.h"

namespace gpufrac {

struct BenchConfig {
  std::vector<BenchTarget> targets;
  WorkloadSpec workload;
  bool open_loop = false;
  std::vector<int> concurrencies = {1};  // closed loop: the sweep
  std::vector<double> request_rates;     // open loop: the sweep (requests/s per target)
  int concurrency_cap = 0;               // open loop: 0 = uncapped
  double burstiness = 1;
  std::optional<int> requests;  // per target and point; default by load (requests_for)
  std::optional<int> warmup;
  double request_timeout_s = 600;
  std::string out_dir = "bench-results";
  std::string arm = "dedicated";
  int models_per_gpu = 1;
  int gpus = 1;
  std::string cli_command;  // recorded in the files
  bool progress = false;    // a live line on stderr
  // Polled about every 0.25 s while a point runs; once it returns true, run_bench drops the
  // point's connections and throws BenchCancelled (no files are written for that point).
  std::function<bool()> cancel;
};

struct BenchCancelled : std::runtime_error {
  BenchCancelled() : std::runtime_error("bench cancelled") {}
};

// Defaults of the reference study: closed loop at c, max(40, 10c) requests and min(16, 2c)
// warmup per target; open loop at rate r, max(40, ceil(60 r)) requests (about a minute) and none.
int default_requests(const BenchConfig& config, int concurrency, double rate);
int default_warmup(const BenchConfig& config, int concurrency, double rate);

// The run point directory for a concurrency (closed loop) or a rate (open loop).
std::string point_directory(const BenchConfig& config, int concurrency, double rate);

// Runs every point, writes its files, and prints one summary table to `table` at the end.
// Returns the results in sweep order.
std::vector<PointResult> run_bench(const BenchConfig& config, std::ostream& table);

// The summary table of finished points (one row per target and point, plus an aggregate row
// per point when there are several targets).
std::string summary_table(const std::vector<PointResult>& points);

}  // namespace gpufrac
