// What KAI-Scheduler and the rendered pod tell a container about its GPU fraction, read from the
// environment `gpufrac k8s exec` starts in:
//
//   NVIDIA_VISIBLE_DEVICES   the GPU's UUID (GPU-...), or its CDI name in CDI mode
//                            (k8s.device-plugin.nvidia.com/gpu=GPU-...): set by KAI's binder
//   GPU_PORTION              KAI's share of that GPU's memory, in (0, 1]: from gpu-fraction
//   GPUFRAC_GPU_MEMORY_MIB   the pod's gpu-memory annotation (downward API); wins over
//                            GPU_PORTION for the memory cap
//   GPUFRAC_SM_SHARE         the pod's gpufrac/sm-share annotation, in (0, 1] or a percentage;
//                            falls back to GPU_PORTION when absent
//
// An empty variable counts as absent (the downward API gives "" for a missing annotation). Every
// variable that is missing where the mode needs it, or malformed, is one line of the UsageError
// read_pod_gpu_env throws (all of them at once): the variable, what was expected, and where the
// value comes from. Pure apart from `lookup`; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "node/node_spec.h"

namespace gpufrac::k8s {

struct PodGpuEnv {
  std::string gpu_uuid;                // empty only in dedicated mode, where it is optional
  std::optional<double> gpu_portion;   // GPU_PORTION
  std::optional<uint64_t> memory_mib;  // GPUFRAC_GPU_MEMORY_MIB
  std::optional<double> sm_share;      // GPUFRAC_SM_SHARE, else GPU_PORTION (fractions)
};

using EnvLookup = std::function<const char*(const char*)>;

// `mode` decides what is required: fractions needs a GPU, an SM share and a memory cap;
// timeslice a GPU and a memory cap; dedicated nothing (a whole GPU; the UUID is read if given).
PodGpuEnv read_pod_gpu_env(const EnvLookup& lookup, SharingMode mode);

// The GPU UUID in an NVIDIA_VISIBLE_DEVICES value: "GPU-..." or "<cdi kind>=GPU-..."; nullopt
// for anything else ("all", an index, a list).
std::optional<std::string> visible_gpu_uuid(const std::string& value);

}  // namespace gpufrac::k8s
