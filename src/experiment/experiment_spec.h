// The experiment spec: which arms (dedicated, timeslice, fractions) to run at how many models per
// GPU, with what model, workload and load sweep; the SLO and the packing search; the prices for
// the cost table. parse_experiment_spec() reads YAML and throws UsageError with one line naming the
// field and the fix. Two specs are compiled in: one for a machine with an NVIDIA GPU (the
// reference study's workload on qwen3-4b) and one for a machine without (tiny on the CPU, a short
// sweep); `gpufrac experiment` with no SPEC picks one (default_experiment_yaml()).
//
//   name: h200-qwen3-4b
//   model: qwen3-4b                 # preset or checkpoint dir, served by `gpufrac serve`
//   device: auto                    # auto | cuda | cpu
//   gpus: 1                         # GPUs (or, on the CPU, one "GPU" of all cores) used per arm
//   engine_args: {max-num-seqs: 32, max-model-len: 4096}
//   node: {sm_ceiling: 0.25, context_reserve: 192M}   # optional, every node of the experiment
//   # node.memory: {min: 7.75G, max: 10.5G} gives each shared model elastic memory instead of 1/m
//   workload: {isl: 2048, osl: 256, isl_stddev: 0, osl_stddev: 0, requests: auto, warmup: auto}
//   runs:                           # each: an arm at one or more packings, a concurrency sweep
//     - {arm: dedicated, models_per_gpu: 1, concurrency: [1, 2, 4, 8, 16, 32]}
//     - {arm: timeslice, models_per_gpu: 2, concurrency: [1, 2, 4, 8, 16, 32]}
//     - {arm: fractions, models_per_gpu: [2, 4, 8], concurrency: [1, 2, 4]}
//   open_loop: {arm: fractions, models_per_gpu: [2], rates: [0.1, 0.5]}   # optional
//   slo: {ttft_p90_ms: 1000, itl_p50_ms: 30}
//   packing_search: {arm: fractions, rate: 0.1, max_models_per_gpu: 16}  # optional
//   cost: {price_per_node_hour: 1.0, gpus_per_node: 8, models: 16}
//   output: experiment-results      # result directories and the report go here
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "node/node_spec.h"

namespace gpufrac {

struct ExperimentRun {
  std::string arm;                  // dedicated | timeslice | fractions
  std::vector<int> models_per_gpu;  // each packing is one node brought up
  std::vector<int> concurrency;     // closed loop, per model
  std::vector<double> rates;        // open loop, requests/s per model (instead of concurrency)
  bool open_loop() const { return !rates.empty(); }
};

struct ExperimentSlo {
  double ttft_p90_ms = 1000;
  double itl_p50_ms = 30;
};

struct PackingSearch {
  std::string arm = "fractions";
  double rate = 0.1;            // requests/s per model, open loop
  int max_models_per_gpu = 16;  // upper end of the search
  int requests = 0;             // per model per probe; 0: bench's default for the rate
};

struct ExperimentSpec {
  std::string source = "spec";
  std::string name = "experiment";
  std::string model = "tiny";
  std::string device = "auto";  // auto | cuda | cpu
  int gpus = 1;
  std::vector<std::pair<std::string, std::string>> engine_args;
  int isl = 2048, osl = 256;
  double isl_stddev = 0, osl_stddev = 0;
  std::optional<int> requests;  // per model and point; default: the study's max(40, 10c)
  std::optional<int> warmup;    // default: min(16, 2c)
  double request_timeout_s = 600;
  std::vector<ExperimentRun> runs;
  ExperimentSlo slo;
  std::optional<PackingSearch> packing_search;
  // node.sm_ceiling: in fractions, each model's MPS share is max(1/m, sm_ceiling) (a ceiling, so
  // shares may add up past 1: idle models leave their SMs to busy ones); 0: 1/m.
  double sm_ceiling = 0;
  // node.context_reserve: the node's per-model reserve for the CUDA context; 0: the node default.
  uint64_t context_reserve_bytes = 0;
  // node.memory: {min, max}: each model of a timeslice or fractions node gets elastic memory with
  // this floor and ceiling (docs/node.md, "Elastic memory") instead of a static 1/m of the GPU.
  std::optional<MemoryAmount> memory_min, memory_max;
  double price_per_node_hour = 1.0;
  int gpus_per_node = 8;
  int cost_models = 16;
  std::string output = "experiment-results";
};

ExperimentSpec parse_experiment_spec(const std::string& yaml_text, const std::string& source);
ExperimentSpec load_experiment_spec(const std::string& path);

// The compiled-in default for this machine: the GPU spec when NVML sees an NVIDIA GPU, else the
// CPU spec. `which` names it ("embedded:gpu" / "embedded:cpu") for messages and result files.
std::string default_experiment_yaml(bool have_gpu);
std::string default_experiment_name(bool have_gpu);

}  // namespace gpufrac
