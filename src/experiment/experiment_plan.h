// What an experiment spec turns into: one node spec per (arm, models per GPU), the bench
// configuration that drives it, and — for resuming — the points whose results don't exist yet.
// Pure functions of the spec and the files under spec.output; no processes, no sockets.
#pragma once

#include <string>
#include <vector>

#include "bench/bench_run.h"
#include "experiment/experiment_spec.h"
#include "node/node_spec.h"

namespace gpufrac {

// `models_per_gpu x spec.gpus` copies of spec.model named m0, m1, ...; on `fractions` each gets
// 1/models_per_gpu of the SMs and of the memory, on `timeslice` of the memory only, on
// `dedicated` (models_per_gpu 1) the whole GPU. The router listens on a free port.
NodeSpec experiment_node_spec(const ExperimentSpec& spec, const std::string& arm,
                              int models_per_gpu);

// Bench settings of every point of that node (targets are added once the node is up).
BenchConfig experiment_bench_config(const ExperimentSpec& spec, const std::string& arm,
                                    int models_per_gpu, const std::string& out_dir);

// One node's worth of points still to run.
struct NodeRunPlan {
  std::string arm;
  int models_per_gpu = 1;
  std::string out_dir;
  std::vector<int> concurrency;  // closed-loop points without a summary.json yet
  std::vector<double> rates;     // open-loop points without a summary.json yet
  int points() const { return int(concurrency.size() + rates.size()); }
};

std::vector<NodeRunPlan> plan_runs(const ExperimentSpec& spec);

// The directory holding every point of that arm and packing: spec.output/<arm>-m<m>.
std::string arm_directory(const std::string& out_dir, const std::string& arm, int models_per_gpu);

}  // namespace gpufrac
