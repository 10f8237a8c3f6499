#include "experiment/experiment_plan.h"

#include <filesystem>

#include "common/error.h"
#include "common/run_label.h"

namespace gpufrac {
namespace {

namespace fs = std::filesystem;

DeviceKind device_kind(const std::string& device) {
  if (device == "cuda") return DeviceKind::kCuda;
  if (device == "cpu") return DeviceKind::kCpu;
  return DeviceKind::kAuto;
}

SharingMode sharing_mode(const std::string& arm) {
  if (arm == "dedicated") return SharingMode::kDedicated;
  if (arm == "timeslice") return SharingMode::kTimeslice;
  return SharingMode::kFractions;
}

bool runs_on_cpu(const ExperimentSpec& spec, const MachineInventory& machine) {
  return spec.device == "cpu" || (spec.device == "auto" && machine.gpus.empty());
}

}  // namespace

void check_gpu_count(const ExperimentSpec& spec, const MachineInventory& machine) {
  if (spec.device == "cuda" && machine.gpus.empty()) {
    throw UsageError(spec.source + ": device: cuda, but " + machine.nvml_status +
                     "; use device: auto or cpu to run on the CPU");
  }
  std::string gpus = "gpus: " + std::to_string(spec.gpus);
  if (runs_on_cpu(spec, machine)) {
    if (spec.gpus > 1) {
      throw UsageError(spec.source + ": " + gpus + ", but the arms run on the CPU (" +
                       (spec.device == "cpu" ? "device: cpu" : machine.nvml_status) +
                       "), which is one device; set gpus: 1");
    }
    return;
  }
  int have = int(machine.gpus.size());
  if (spec.gpus > have) {
    throw UsageError(spec.source + ": " + gpus + ", but this machine has " + std::to_string(have) +
                     (have == 1 ? " GPU" : " GPUs") +
                     " (gpufrac gpus lists them); set gpus: " + std::to_string(have) +
                     " or fewer, or run on a machine with " + std::to_string(spec.gpus));
  }
}

std::string where_arms_run(const ExperimentSpec& spec, const MachineInventory& machine) {
  if (runs_on_cpu(spec, machine)) return "the CPU";
  return std::to_string(spec.gpus) + (spec.gpus == 1 ? " GPU" : " GPUs");
}

NodeSpec experiment_node_spec(const ExperimentSpec& spec, const std::string& arm, int models_per_gpu) {
  NodeSpec node;
  node.source = spec.source;
  node.name = "experiment-" + run_label(arm, models_per_gpu);
  node.listen_port = 0;
  node.device = device_kind(spec.device);
  node.mode = sharing_mode(arm);
  if (spec.context_reserve_bytes > 0) node.context_reserve_bytes = spec.context_reserve_bytes;
  const bool ceiling_above_share = arm == "fractions" && spec.sm_ceiling > 1.0 / models_per_gpu;
  node.oversubscribe_compute = ceiling_above_share;
  if (node.device != DeviceKind::kCpu) {
    node.gpus_auto = false;
    for (int g = 0; g < spec.gpus; ++g) node.gpus.push_back({std::to_string(g), std::nullopt});
  }
  for (int i = 0; i < models_per_gpu * spec.gpus; ++i) {
    ModelSpec model;
    model.name = "m" + std::to_string(i);
    model.model = spec.model;
    model.engine_args = spec.engine_args;
    if (arm != "dedicated") {
      if (spec.memory_max) {
        model.fraction.memory_min = spec.memory_min;
        model.fraction.memory_max = spec.memory_max;
      } else {
        model.fraction.memory_share = 1.0 / models_per_gpu;
      }
      if (arm == "fractions") {
        model.fraction.compute = ceiling_above_share ? spec.sm_ceiling : 1.0 / models_per_gpu;
      }
    }
    node.models.push_back(std::move(model));
  }
  return node;
}

BenchConfig experiment_bench_config(const ExperimentSpec& spec, const std::string& arm,
                                    int models_per_gpu, const std::string& out_dir) {
  BenchConfig config;
  config.workload.isl = spec.isl;
  config.workload.osl = spec.osl;
  config.workload.isl_stddev = spec.isl_stddev;
  config.workload.osl_stddev = spec.osl_stddev;
  config.requests = spec.requests;
  config.warmup = spec.warmup;
  config.request_timeout_s = spec.request_timeout_s;
  config.out_dir = out_dir;
  config.arm = arm;
  config.models_per_gpu = models_per_gpu;
  config.gpus = spec.gpus;
  config.cli_command = "gpufrac experiment (" + spec.source + ")";
  return config;
}

namespace {

bool point_done(const BenchConfig& config, int concurrency, double rate) {
  return fs::exists(fs::path(point_directory(config, concurrency, rate)) / "summary.json");
}

}  // namespace

std::string arm_directory(const std::string& out_dir, const std::string& arm, int models_per_gpu) {
  return out_dir + "/" + run_label(arm, models_per_gpu);
}

std::vector<NodeRunPlan> plan_runs(const ExperimentSpec& spec) {
  std::vector<NodeRunPlan> plans;
  for (const ExperimentRun& run : spec.runs) {
    for (int m : run.models_per_gpu) {
      NodeRunPlan plan{run.arm, m, spec.output, {}, {}};
      BenchConfig config = experiment_bench_config(spec, run.arm, m, spec.output);
      if (run.open_loop()) config.open_loop = true;
      for (int c : run.concurrency) {
        if (!run.open_loop() && !point_done(config, c, 0)) plan.concurrency.push_back(c);
      }
      for (double r : run.rates) {
        if (!point_done(config, 0, r)) plan.rates.push_back(r);
      }
      plans.push_back(std::move(plan));
    }
  }
  return plans;
}

}  // namespace gpufrac
