// What the machine has for models to run on: NVIDIA GPUs seen through NVML (loaded at run time),
// the MPS daemons and servers already running, and the CPU cores and memory that stand in for a
// GPU on a machine without one (docs/architecture.md, "Sharing modes": a "GPU" is the set of cores this process may
// run on). Read-only snapshots; every function here is thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"

namespace gpufrac {

struct GpuProcess {
  uint32_t pid = 0;
  uint64_t used_bytes = 0;  // as NVML reports it (MPS clients' memory shows on the server)
  std::string name;         // /proc/PID/comm, "" when not visible from here
};

struct GpuInfo {
  int index = 0;            // NVML index (what nvidia-smi shows)
  std::string uuid;         // "GPU-..."
  std::string name;         // "NVIDIA H200"
  uint64_t memory_total = 0;
  uint64_t memory_used = 0;
  int sm_count = 0;              // 0 when NVML cannot tell (cores per SM unknown for the arch)
  std::string compute_capability;  // "9.0"
  std::string mig_mode;       // "disabled", "enabled", "n/a"
  std::string compute_mode;   // "default", "exclusive_process", "prohibited", ...
  std::vector<GpuProcess> processes;
};

struct MpsProcessSeen {
  uint32_t pid = 0;
  std::string kind;      // "control" (nvidia-cuda-mps-control) or "server" (nvidia-cuda-mps-server)
  std::string pipe_dir;  // CUDA_MPS_PIPE_DIRECTORY of the process when readable, else ""
};

struct MachineInventory {
  bool nvml_loaded = false;
  std::string nvml_status;  // why there are no GPUs, when nvml_loaded is false
  std::string driver_version;
  std::vector<GpuInfo> gpus;
  std::vector<MpsProcessSeen> mps;
  std::vector<int> cpus;     // cores this process may run on (sched_getaffinity)
  uint64_t host_memory_bytes = 0;  // MemTotal
};

MachineInventory discover_machine();
// SM count from CUDA cores per SM of the compute capability; 0 when the arch is unknown.
int sm_count_from_cores(unsigned cuda_cores, int cc_major, int cc_minor);
// GPU memory each process uses now, by pid (empty without NVML).
std::vector<GpuProcess> gpu_processes(const std::string& uuid);

Json inventory_to_json(const MachineInventory& inventory);
std::string format_inventory(const MachineInventory& inventory);  // the `gpufrac gpus` table

}  // namespace gpufrac
