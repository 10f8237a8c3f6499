// What an experiment spec turns into: one node spec per (arm, models per GPU), the bench
// configuration that drives it, and — for resuming — the points whose results don't exist yet.
// Every arm runs on the same `spec.gpus` GPUs, 0 .. gpus-1 (on the CPU: one "GPU" of all cores).
// Pure functions of the spec, the machine's inventory and the files under spec.output; no
// processes, no sockets.
#pragma once

#include <string>
#include <vector>

#include "bench/bench_run.h"
#include "experiment/experiment_spec.h"
#include "node/gpus.h"
#include "node/node_spec.h"

namespace gpufrac {

// Whether this machine can run the spec's arms before any starts: `gpus` GPUs at least, and on
// the CPU (device: cpu, or no NVIDIA GPU under device: auto) gpus 1. Throws UsageError naming
// the spec's `gpus` (or `device`) and the fix.
void check_gpu_count(const ExperimentSpec& spec, const MachineInventory& machine);

// "4 GPUs", "1 GPU", or "the CPU": where the spec's arms run on this machine.
std::string where_arms_run(const ExperimentSpec& spec, const MachineInventory& machine);

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
