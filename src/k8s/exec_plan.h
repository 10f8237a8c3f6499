// What `gpufrac k8s exec` starts, worked out before anything starts (pure): the engine's limits
// from the pod's GPU environment (pod_gpu_env.h), as the node computes them (placement.h) —
// SM % = round(share × 100); cap = GPUFRAC_GPU_MEMORY_MIB MiB, else GPU_PORTION × the GPU's
// memory − context reserve — set the way `gpufrac up` sets them (model_launch.h set_gpu_limits):
//   fractions   CUDA_VISIBLE_DEVICES=<UUID>, CUDA_MPS_PIPE_DIRECTORY / _LOG_DIRECTORY of the
//               agent's daemon for that GPU, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE,
//               CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=<cap>M, the memcap shim with the cap (if any)
//   timeslice   the shim with the cap (required), an empty pipe directory (no MPS)
//   dedicated   an empty pipe directory
// and the engine's command line with {gpu} ("0": the pod sees one GPU), {gpu_uuid},
// {memory_bytes} and {gpu_memory_utilization} (cap / the GPU's memory) filled.
// Throws UsageError naming the variable or flag when something is missing.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "k8s/pod_gpu_env.h"
#include "node/node_spec.h"

namespace gpufrac::k8s {

struct ExecOptions {
  SharingMode mode = SharingMode::kFractions;
  std::string agent_root;
  uint64_t context_reserve_bytes = uint64_t(512) << 20;
  std::string memcap_library;  // empty: not found (fractions then caps by MPS alone)
  std::string state_dir;       // private to this exec: the shim's ledgers, the empty pipe directory
};

struct ExecPlan {
  std::string gpu_uuid;
  int sm_percent = 100;
  uint64_t memory_cap_bytes = 0;
  std::vector<std::string> env;  // the engine's whole environment
  std::vector<std::pair<std::string, std::string>>
      set;  // what exec set in it, in order (--dry-run)
  std::vector<std::string> argv;
};

// `gpu_memory_bytes`: the GPU's memory from NVML; 0 when unknown (then GPU_PORTION caps and
// {gpu_memory_utilization} are errors naming GPUFRAC_GPU_MEMORY_MIB as the way out).
// `base_env` is the environment exec runs in.
ExecPlan plan_exec(const PodGpuEnv& pod, const ExecOptions& options, uint64_t gpu_memory_bytes,
                   const std::vector<std::string>& command, std::vector<std::string> base_env);

}  // namespace gpufrac::k8s
