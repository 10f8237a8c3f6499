#include "node/placement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>

#include "common/error.h"
#include "common/strings.h"

namespace gpufrac {
namespace {

constexpr int kMaxMpsClientsPerDevice = 48;  // past it CUDA fails with MpsMaxClientsReached
constexpr double kEpsilon = 1e-9;

struct DeviceLoad {
  uint64_t memory_left = 0;
  double compute_used = 0;
  int cores_used = 0;
  int instances = 0;
};

std::string model_field(size_t index) { return "models[" + std::to_string(index) + "]"; }

uint64_t amount_bytes(const MemoryAmount& amount, const PlacementDevice& device, uint64_t reserve) {
  return amount.bytes ? *amount.bytes
                      : share_memory_cap(*amount.share, device.memory_bytes, reserve);
}

// The memory an instance of `model` gets on `device`: the floor it commits and the ceiling it may
// reach (one cap for both unless elastic). A ceiling of 0: its memory share leaves nothing.
struct MemoryLimits {
  uint64_t floor = 0;
  uint64_t ceiling = 0;
  bool elastic = false;
};

MemoryLimits memory_limits(const ModelSpec& model, const PlacementDevice& device,
                           uint64_t reserve) {
  const FractionSpec& f = model.fraction;
  uint64_t cap = 0;
  if (device.mode == SharingMode::kDedicated) {
    cap = device.memory_bytes > reserve ? device.memory_bytes - reserve : 0;
  } else if (f.elastic_memory()) {
    return {amount_bytes(*f.memory_min, device, reserve),
            amount_bytes(*f.memory_max, device, reserve), true};
  } else {
    cap = amount_bytes({f.memory_share, f.memory_bytes}, device, reserve);
  }
  return {cap, cap, false};
}

int cores_for(double share, const PlacementDevice& device) {
  int cores = int(std::lround(share * double(device.cpus.size())));
  return std::clamp(cores, 1, int(device.cpus.size()));
}

// Why `model` does not fit `device` now; empty when it does.
std::string misfit(const NodeSpec& spec, size_t model_index, const PlacementDevice& device,
                   const DeviceLoad& load) {
  const ModelSpec& model = spec.models[model_index];
  std::string field = model_field(model_index);
  std::string where = device.is_cpu() ? "the CPU" : "GPU " + device.id;
  if (device.mode == SharingMode::kDedicated) {
    if (load.instances > 0) {
      return field + ": " + where + " is dedicated and already holds a model; a dedicated GPU " +
             "serves one model, so add GPUs or use mode: fractions";
    }
  } else if (device.mode == SharingMode::kFractions && load.instances >= kMaxMpsClientsPerDevice) {
    return field + ": " + where + " already has " + std::to_string(kMaxMpsClientsPerDevice) +
           " MPS clients, the most MPS allows; add GPUs";
  }
  if (device.mode == SharingMode::kFractions) {
    double share = *model.fraction.compute;
    if (!spec.oversubscribe_compute) {
      if (load.compute_used + share > 1 + kEpsilon) {
        char text[64];
        std::snprintf(text, sizeof text, "%.3g of the SMs, but %s has %.3g left", share,
                      where.c_str(), std::max(0.0, 1 - load.compute_used));
        return field + ".fraction.compute: needs " + text +
               "; lower compute, add GPUs, or set oversubscribe_compute: true";
      }
      if (device.is_cpu() && load.cores_used + cores_for(share, device) > int(device.cpus.size())) {
        return field + ".fraction.compute: needs " + std::to_string(cores_for(share, device)) +
               " core(s) of its own, but the CPU has " +
               std::to_string(int(device.cpus.size()) - load.cores_used) +
               " left; lower compute, or set oversubscribe_compute: true";
      }
    }
  }
  const uint64_t reserve = spec.context_reserve_bytes;
  const MemoryLimits memory = memory_limits(model, device, reserve);
  const std::string memory_field = field + ".fraction.memory" + (memory.elastic ? ".max" : "");
  if (memory.ceiling == 0) {
    return memory_field + ": leaves nothing on " + where + " after the " + format_bytes(reserve) +
           " context reserve; give a larger share";
  }
  if (memory.elastic) {
    if (memory.floor > memory.ceiling) {
      return field + ".fraction.memory: min (" + format_bytes(memory.floor) + ") is above max (" +
             format_bytes(memory.ceiling) + ") on " + where + "; give min <= max";
    }
    if (memory.ceiling + reserve > device.memory_bytes) {
      return memory_field + ": " + format_bytes(memory.ceiling) + " + " + format_bytes(reserve) +
             " reserve is more than " + where + "'s " + format_bytes(device.memory_bytes) +
             "; lower max";
    }
  }
  if (memory.floor + reserve > load.memory_left) {
    return field + ".fraction.memory" + (memory.elastic ? ".min" : "") + ": needs " +
           format_bytes(memory.floor) + " + " + format_bytes(reserve) + " reserve, but " + where +
           " has " + format_bytes(load.memory_left) + " left; lower " +
           (memory.elastic ? "min" : "memory") + ", reduce replicas, or add GPUs";
  }
  return {};
}

// The device a model's `gpu` names, by NVML index or UUID (on the CPU: "cpu" or "0"); nullopt
// when it names none. Throws UsageError naming models[i].gpu when it is not one of `devices`.
std::optional<size_t> pinned_device(const NodeSpec& spec, size_t model_index,
                                    const std::vector<PlacementDevice>& devices) {
  const std::string& id = spec.models[model_index].gpu;
  if (id.empty()) return std::nullopt;
  std::string ids;
  for (size_t d = 0; d < devices.size(); ++d) {
    const PlacementDevice& device = devices[d];
    if (id == device.id || id == device.uuid || (device.is_cpu() && id == "0")) return d;
    ids += (ids.empty() ? "" : ", ") + device.id;
  }
  throw UsageError(spec.source + ": " + model_field(model_index) + ".gpu: '" + id +
                   "' is not one of this node's devices (" + ids +
                   "); list it under gpus, or drop gpu to let placement choose");
}

}  // namespace

uint64_t share_memory_cap(double share, uint64_t device_bytes, uint64_t reserve) {
  double share_bytes = share * double(device_bytes);
  return share_bytes > double(reserve) ? uint64_t(share_bytes) - reserve : 0;
}

uint64_t elastic_pool_bytes(const Placement& placement, size_t device_index, uint64_t reserve) {
  uint64_t taken = 0;
  for (const PlacedInstance& instance : placement.instances) {
    if (instance.device_index != device_index) continue;
    taken += reserve + (instance.elastic_memory ? 0 : instance.memory_cap_bytes);
  }
  uint64_t memory = placement.devices[device_index].memory_bytes;
  return memory > taken ? memory - taken : 0;
}

int sm_percent_of(double compute_share) { return std::clamp(int(std::lround(compute_share * 100)), 1, 100); }

void check_fraction_fields(const NodeSpec& spec, const std::vector<PlacementDevice>& devices) {
  bool any_fractions = false, any_timeslice = false;
  for (const PlacementDevice& d : devices) {
    any_fractions |= d.mode == SharingMode::kFractions;
    any_timeslice |= d.mode == SharingMode::kTimeslice;
  }
  for (size_t i = 0; i < spec.models.size(); ++i) {
    const FractionSpec& f = spec.models[i].fraction;
    std::string field = model_field(i) + ".fraction";
    if (any_fractions && !f.compute) {
      throw UsageError(spec.source + ": " + field + ".compute: missing; fractions mode gives each " +
                       "model a share of the SMs, e.g. fraction: {compute: 0.5, memory: 0.5}");
    }
    if ((any_fractions || any_timeslice) && !f.memory_given()) {
      throw UsageError(spec.source + ": " + field + ".memory: missing; every shared GPU caps each " +
                       "model's memory, e.g. fraction: {memory: 0.5} or {memory: 20G}");
    }
  }
}

std::vector<PlacementDevice> select_devices(const NodeSpec& spec, const MachineInventory& machine) {
  auto mode_of = [&](const GpuSelection* selection) {
    return selection && selection->mode ? *selection->mode : spec.mode;
  };
  bool use_cpu = spec.device == DeviceKind::kCpu ||
                 (spec.device == DeviceKind::kAuto && machine.gpus.empty());
  if (use_cpu) {
    if (!spec.gpus_auto && (spec.gpus.size() != 1 || (spec.gpus[0].id != "cpu" && spec.gpus[0].id != "0"))) {
      throw UsageError(spec.source + ": gpus: this node runs on the CPU (" +
                       (machine.gpus.empty() ? machine.nvml_status : "device: cpu") +
                       "), which is one device; use gpus: auto or gpus: [{gpu: cpu, mode: ...}]");
    }
    PlacementDevice cpu;
    cpu.id = "cpu";
    cpu.name = "CPU (" + std::to_string(machine.cpus.size()) + " cores)";
    cpu.memory_bytes = machine.host_memory_bytes;
    cpu.sm_count = int(machine.cpus.size());
    cpu.cpus = machine.cpus;
    cpu.mode = mode_of(spec.gpus_auto ? nullptr : &spec.gpus[0]);
    return {cpu};
  }
  if (machine.gpus.empty()) {
    throw UsageError(spec.source + ": device: cuda, but " + machine.nvml_status +
                     "; use device: auto or cpu to run on the CPU");
  }
  auto to_device = [&](const GpuInfo& gpu, SharingMode mode) {
    PlacementDevice d;
    d.id = std::to_string(gpu.index);
    d.uuid = gpu.uuid;
    d.name = gpu.name;
    d.memory_bytes = gpu.memory_total;
    d.sm_count = gpu.sm_count;
    d.mode = mode;
    return d;
  };
  std::vector<PlacementDevice> devices;
  if (spec.gpus_auto) {
    for (const GpuInfo& gpu : machine.gpus) devices.push_back(to_device(gpu, spec.mode));
    return devices;
  }
  for (size_t i = 0; i < spec.gpus.size(); ++i) {
    const GpuSelection& selection = spec.gpus[i];
    auto it = std::find_if(machine.gpus.begin(), machine.gpus.end(), [&](const GpuInfo& g) {
      return std::to_string(g.index) == selection.id || g.uuid == selection.id;
    });
    if (it == machine.gpus.end()) {
      throw UsageError(spec.source + ": gpus[" + std::to_string(i) + "]: this machine has no GPU '" +
                       selection.id + "' (it has 0.." + std::to_string(machine.gpus.size() - 1) +
                       "); list indexes or UUIDs that `gpufrac gpus` shows");
    }
    devices.push_back(to_device(*it, mode_of(&selection)));
  }
  return devices;
}

Placement place_models(const NodeSpec& spec, std::vector<PlacementDevice> devices) {
  if (devices.empty()) throw UsageError(spec.source + ": gpus: no device to place models on");
  check_fraction_fields(spec, devices);
  Placement placement;
  placement.devices = std::move(devices);
  const std::vector<PlacementDevice>& devs = placement.devices;

  std::vector<PlacedInstance> pending;
  for (size_t m = 0; m < spec.models.size(); ++m) {
    const ModelSpec& model = spec.models[m];
    for (int r = 0; r < model.replicas; ++r) {
      PlacedInstance instance;
      instance.model_index = m;
      instance.replica = r;
      instance.instance_name = model.replicas > 1 ? model.name + "#" + std::to_string(r) : model.name;
      pending.push_back(instance);
    }
  }
  // binpack: largest memory first (first-fit decreasing: a cap, or an elastic floor), measured
  // on the largest device.
  uint64_t largest = 0;
  for (const PlacementDevice& d : devs) largest = std::max(largest, d.memory_bytes);
  if (spec.placement == PlacementPolicy::kBinpack) {
    PlacementDevice reference;
    reference.memory_bytes = largest;
    reference.mode = SharingMode::kFractions;
    std::stable_sort(pending.begin(), pending.end(), [&](const PlacedInstance& a, const PlacedInstance& b) {
      const ModelSpec& ma = spec.models[a.model_index];
      const ModelSpec& mb = spec.models[b.model_index];
      uint64_t sa = ma.fraction.memory_given() ? memory_limits(ma, reference, 0).floor : largest;
      uint64_t sb = mb.fraction.memory_given() ? memory_limits(mb, reference, 0).floor : largest;
      return sa > sb;
    });
  }
  // Models pinned to a GPU first: the others then go where room is left.
  std::stable_partition(pending.begin(), pending.end(), [&](const PlacedInstance& i) {
    return !spec.models[i.model_index].gpu.empty();
  });

  std::vector<DeviceLoad> loads(devs.size());
  for (size_t d = 0; d < devs.size(); ++d) loads[d].memory_left = devs[d].memory_bytes;
  for (PlacedInstance& instance : pending) {
    const ModelSpec& model = spec.models[instance.model_index];
    std::optional<size_t> pin = pinned_device(spec, instance.model_index, devs);
    int chosen = -1;
    std::string reason;
    for (size_t d = 0; d < devs.size(); ++d) {
      if (pin && d != *pin) continue;
      std::string why = misfit(spec, instance.model_index, devs[d], loads[d]);
      if (!why.empty()) {
        if (reason.empty()) reason = why;
        continue;
      }
      if (chosen < 0) {
        chosen = int(d);
        if (spec.placement == PlacementPolicy::kBinpack) break;
      } else if (loads[d].memory_left > loads[size_t(chosen)].memory_left) {
        chosen = int(d);
      }
    }
    if (chosen < 0) {
      std::string replica = model.replicas > 1 ? " (replica " + std::to_string(instance.replica + 1) +
                                                     " of " + std::to_string(model.replicas) + ")"
                                               : "";
      throw UsageError(spec.source + ": cannot place model '" + model.name + "'" + replica + ": " +
                       reason + "; nothing was started");
    }
    const PlacementDevice& device = devs[size_t(chosen)];
    DeviceLoad& load = loads[size_t(chosen)];
    instance.device_index = size_t(chosen);
    instance.mode = device.mode;
    const MemoryLimits memory = memory_limits(model, device, spec.context_reserve_bytes);
    instance.memory_cap_bytes = memory.ceiling;
    instance.elastic_memory = memory.elastic;
    instance.memory_floor_bytes = memory.elastic ? memory.floor : 0;
    load.memory_left -= memory.floor + spec.context_reserve_bytes;
    load.instances++;
    if (device.mode == SharingMode::kFractions) {
      instance.compute_share = *model.fraction.compute;
      instance.sm_percent = sm_percent_of(instance.compute_share);
      load.compute_used += instance.compute_share;
      if (device.is_cpu()) {
        int cores = cores_for(instance.compute_share, device);
        for (int c = 0; c < cores; ++c) {
          size_t slot = size_t(load.cores_used + c) % device.cpus.size();  // wraps only when oversubscribed
          instance.cpus.push_back(device.cpus[slot]);
        }
        load.cores_used += cores;
      }
    }
  }
  std::sort(pending.begin(), pending.end(), [](const PlacedInstance& a, const PlacedInstance& b) {
    return std::pair(a.model_index, a.replica) < std::pair(b.model_index, b.replica);
  });
  placement.instances = std::move(pending);
  return placement;
}

std::string gpu_memory_utilization(const PlacedInstance& instance, const PlacementDevice& device) {
  double ratio = device.memory_bytes ? double(instance.memory_cap_bytes) / double(device.memory_bytes) : 0;
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", std::floor(ratio * 1e4) / 1e4);
  return text;
}

}  // namespace gpufrac
