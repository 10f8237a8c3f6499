// Placement: which device each model instance runs on, with what share of its SMs (MPS active
// thread percentage) or cores, and how many bytes of memory it may use.
//
// Rules (docs/architecture.md, "Sharing modes"):
// - Memory is never over-committed: on every device, the sum over its instances of
//   (memory cap + context_reserve) <= the device's memory. A share s of a device of M bytes is a
//   cap of s*M - context_reserve, so shares that add up to 1 fill the device exactly (two models
//   at 0.5 of a 40 GiB A100 with the default 512 MiB reserve get 19968 MiB each, the study's cap).
// - Elastic memory (fraction.memory: {min, max}) counts its floor there instead of a cap: the
//   floors, static caps and reserves add up to at most the device, and each ceiling + reserve to
//   at most the device (ceilings may add up to more: the instances of a device share what its
//   static instances and reserves leave, the pool, through the memcap shim). A share becomes
//   bytes as for a cap (a floor share that leaves nothing is a floor of 0). On a dedicated device
//   the instance gets the whole device, as always, and is not elastic.
// - Compute shares on a `fractions` device add up to at most 1, unless the spec sets
//   oversubscribe_compute. On the CPU, a `fractions` instance gets round(share * cores) cores of
//   its own (at least one); `timeslice` instances float over all cores.
// - A `dedicated` device holds one instance, which gets the whole device.
// - binpack fills devices in order (largest instances first); spread puts each instance on the
//   device with the most memory left. A model with `gpu` set goes on that device only (every
//   replica), and such models are placed before the others.
// - If any instance cannot be placed, place_models throws UsageError naming the model's field and
//   the fix, and nothing is started.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "node/gpus.h"
#include "node/node_spec.h"

namespace gpufrac {

struct PlacementDevice {
  std::string id;    // "0" (NVML index) or "cpu"
  std::string uuid;  // "GPU-..."; empty on the CPU
  std::string name;  // "NVIDIA H200", "CPU (2 cores)"
  uint64_t memory_bytes = 0;
  int sm_count = 0;       // 0 when unknown; on the CPU: its number of cores
  std::vector<int> cpus;  // the CPU device's cores
  SharingMode mode = SharingMode::kFractions;
  bool is_cpu() const { return uuid.empty(); }
};

struct PlacedInstance {
  size_t model_index = 0;
  int replica = 0;
  std::string instance_name;  // the model's name, with "#<replica>" when it has several
  size_t device_index = 0;
  SharingMode mode = SharingMode::kFractions;
  double compute_share = 1;   // of the device (1 when unpartitioned)
  int sm_percent = 100;       // CUDA_MPS_ACTIVE_THREAD_PERCENTAGE in fractions mode
  uint64_t memory_cap_bytes = 0;    // the cap; for elastic memory the ceiling
  bool elastic_memory = false;
  uint64_t memory_floor_bytes = 0;  // elastic memory: the floor
  std::vector<int> cpus;      // CPU fractions: its own cores; empty: float
};

struct Placement {
  std::vector<PlacementDevice> devices;
  std::vector<PlacedInstance> instances;  // in spec order (model, then replica)
};

// The devices a spec runs on: its GPUs (each with its mode), or one CPU "GPU" when the spec says
// device: cpu or (device: auto) the machine has no NVIDIA GPU. Throws UsageError naming `gpus` or
// `device` when the spec asks for GPUs the machine does not have.
std::vector<PlacementDevice> select_devices(const NodeSpec& spec, const MachineInventory& machine);

Placement place_models(const NodeSpec& spec, std::vector<PlacementDevice> devices);

// The fraction fields a mode needs, for every model (place_models checks them first): fractions
// needs compute and memory, timeslice memory. Throws UsageError naming the field.
void check_fraction_fields(const NodeSpec& spec, const std::vector<PlacementDevice>& devices);

// A memory share's cap: share * device memory - reserve, 0 when that leaves nothing.
uint64_t share_memory_cap(double share, uint64_t device_bytes, uint64_t reserve);

// What the elastic instances of device `device_index` share: its memory less every instance's
// reserve and every static instance's cap.
uint64_t elastic_pool_bytes(const Placement& placement, size_t device_index, uint64_t reserve);
// A compute share as CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: rounded, 1..100.
int sm_percent_of(double compute_share);

// "{gpu_memory_utilization}": cap / device memory, rounded down to 4 decimals.
std::string gpu_memory_utilization(const PlacedInstance& instance, const PlacementDevice& device);

}  // namespace gpufrac
