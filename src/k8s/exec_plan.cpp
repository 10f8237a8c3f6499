#include "k8s/exec_plan.h"

#include <algorithm>

#include "common/error.h"
#include "k8s/agent_layout.h"
#include "node/model_launch.h"
#include "node/placement.h"
#include "node/process.h"

namespace gpufrac::k8s {
namespace {

constexpr const char* kUtilization = "{gpu_memory_utilization}";

uint64_t memory_cap(const PodGpuEnv& pod, const ExecOptions& options, uint64_t gpu_memory_bytes) {
  if (options.mode == SharingMode::kDedicated) {
    return gpu_memory_bytes > options.context_reserve_bytes
               ? gpu_memory_bytes - options.context_reserve_bytes
               : 0;
  }
  if (pod.memory_mib) return *pod.memory_mib << 20;
  if (gpu_memory_bytes == 0) {
    throw UsageError(
        "GPU_PORTION: a share of the GPU's memory, but NVML cannot tell how much memory " +
        pod.gpu_uuid +
        " has; run the pod with the nvidia runtime class (NVML), or give the cap as " +
        "GPUFRAC_GPU_MEMORY_MIB (the gpu-memory annotation)");
  }
  uint64_t cap =
      share_memory_cap(*pod.gpu_portion, gpu_memory_bytes, options.context_reserve_bytes);
  if (cap == 0) {
    throw UsageError(
        "GPU_PORTION: " + std::to_string(*pod.gpu_portion) + " of " + pod.gpu_uuid +
        " leaves nothing after the context reserve; ask KAI for a larger gpu-fraction");
  }
  return cap;
}

}  // namespace

ExecPlan plan_exec(const PodGpuEnv& pod, const ExecOptions& options, uint64_t gpu_memory_bytes,
                   const std::vector<std::string>& command, std::vector<std::string> base_env) {
  if (command.empty())
    throw UsageError("give the engine's command after --: gpufrac k8s exec -- gpufrac serve ...");
  if (options.mode == SharingMode::kTimeslice && options.memcap_library.empty()) {
    throw UsageError(std::string("--memcap-library: timeslice caps memory with ") +
                     kMemcapLibraryName +
                     ", which is not beside gpufrac in this image; add it, or give its path");
  }
  ExecPlan plan;
  plan.gpu_uuid = pod.gpu_uuid;
  plan.memory_cap_bytes = memory_cap(pod, options, gpu_memory_bytes);
  if (pod.sm_share) plan.sm_percent = sm_percent_of(*pod.sm_share);

  clear_inherited_limits(base_env);
  GpuLimits limits;
  limits.gpu_uuid = pod.gpu_uuid;
  limits.mode = options.mode;
  limits.sm_percent = plan.sm_percent;
  limits.memory_cap_bytes = plan.memory_cap_bytes;
  limits.mps_client_env = {
      {"CUDA_MPS_PIPE_DIRECTORY", mps_pipe_dir(options.agent_root, pod.gpu_uuid)},
      {"CUDA_MPS_LOG_DIRECTORY", mps_log_dir(options.agent_root, pod.gpu_uuid)}};
  limits.no_mps_pipe_dir = options.state_dir + "/no-mps";
  limits.memcap_library = options.memcap_library;
  limits.memcap_tenant = "engine";
  limits.memcap_state_dir = options.state_dir + "/memcap";
  plan.env = base_env;
  set_gpu_limits(plan.env, limits);
  // Dedicated without a UUID: CUDA sees the one GPU the container has.
  if (pod.gpu_uuid.empty()) set_env(plan.env, "CUDA_VISIBLE_DEVICES", std::nullopt);
  for (const std::string& entry : plan.env) {
    if (std::find(base_env.begin(), base_env.end(), entry) != base_env.end()) continue;
    size_t equals = entry.find('=');
    plan.set.emplace_back(entry.substr(0, equals), entry.substr(equals + 1));
  }

  std::vector<std::pair<std::string, std::string>> values = {
      {"gpu", "0"},
      {"gpu_uuid", pod.gpu_uuid},
      {"memory_bytes", std::to_string(plan.memory_cap_bytes)}};
  bool wants_utilization = std::any_of(command.begin(), command.end(), [](const std::string& arg) {
    return arg.find(kUtilization) != std::string::npos;
  });
  if (wants_utilization) {
    if (gpu_memory_bytes == 0) {
      throw UsageError(
          std::string("command: ") + kUtilization +
          " is the cap over the GPU's memory, but NVML cannot " +
          "tell how much memory the GPU has; run the pod with the nvidia runtime class (NVML)");
    }
    PlacedInstance instance;
    instance.memory_cap_bytes = plan.memory_cap_bytes;
    PlacementDevice device;
    device.memory_bytes = gpu_memory_bytes;
    values.emplace_back("gpu_memory_utilization", gpu_memory_utilization(instance, device));
  }
  for (const std::string& arg : command)
    plan.argv.push_back(expand_placeholders(arg, values, "command"));
  return plan;
}

}  // namespace gpufrac::k8s
