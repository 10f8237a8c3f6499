#include "node/gpus.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "common/strings.h"
#include "node/nvml.h"

namespace gpufrac {
namespace {

// A /proc file of a process that may exit while it is read: a failed open or read (ESRCH once
// the process is gone) ends the text, an empty one if nothing was read; never throws (a
// std::ifstream read error throws from inside libstdc++'s filebuf).
std::string read_small_file(const std::string& path) {
  std::string text;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    text.append(buffer, size_t(got));
  }
  ::close(fd);
  return text;
}

std::string process_name(uint32_t pid) {
  std::string comm = read_small_file("/proc/" + std::to_string(pid) + "/comm");
  return std::string(trim(comm));
}

std::string environ_value(uint32_t pid, std::string_view name) {
  std::string environ = read_small_file("/proc/" + std::to_string(pid) + "/environ");
  for (const std::string& entry : split(environ, '\0')) {
    if (entry.size() > name.size() && starts_with(entry, name) && entry[name.size()] == '=') {
      return entry.substr(name.size() + 1);
    }
  }
  return {};
}

// nvidia-cuda-mps-control / -server by the program name in argv (comm is cut at 15 characters);
// a script standing in for one (tests) shows as its first argument.
std::string mps_kind(uint32_t pid) {
  std::string cmdline = read_small_file("/proc/" + std::to_string(pid) + "/cmdline");
  std::vector<std::string> args = split(cmdline, '\0');
  for (size_t i = 0; i < args.size() && i < 2; ++i) {
    std::string base = args[i].substr(args[i].rfind('/') + 1);
    if (base.find("mps-control") != std::string::npos ||
        base.find("mps_control") != std::string::npos) {
      return "control";
    }
    if (base.find("mps-server") != std::string::npos) return "server";
  }
  return {};
}

std::vector<MpsProcessSeen> find_mps_processes() {
  std::vector<MpsProcessSeen> seen;
  DIR* dir = opendir("/proc");
  if (!dir) return seen;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    std::string kind = mps_kind(uint32_t(pid));
    if (kind.empty()) continue;
    seen.push_back({uint32_t(pid), kind, environ_value(uint32_t(pid), "CUDA_MPS_PIPE_DIRECTORY")});
  }
  closedir(dir);
  return seen;
}

uint64_t host_memory_total() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemTotal:") return kib * 1024;
  }
  return 0;
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
  }
  return cpus;
}

std::vector<GpuProcess> device_processes(const nvml::Library& lib, nvml::Device device) {
  std::vector<GpuProcess> out;
  if (!lib.api().device_processes) return out;
  std::vector<nvml::ProcessInfo> infos(64);
  unsigned count = unsigned(infos.size());
  nvml::Return r = lib.api().device_processes(device, &count, infos.data());
  if (r == nvml::kErrorInsufficientSize) {
    infos.resize(count + 16);
    count = unsigned(infos.size());
    r = lib.api().device_processes(device, &count, infos.data());
  }
  if (r != nvml::kSuccess) return out;
  for (unsigned i = 0; i < count && i < infos.size(); ++i) {
    out.push_back({infos[i].pid, infos[i].used_gpu_memory, process_name(infos[i].pid)});
  }
  return out;
}

std::string compute_mode_name(int mode) {
  switch (mode) {
    case 0: return "default";
    case 1: return "exclusive_thread";
    case 2: return "prohibited";
    case 3: return "exclusive_process";
    default: return "unknown";
  }
}

GpuInfo read_gpu(const nvml::Library& lib, unsigned index, nvml::Device device) {
  const nvml::Api& api = lib.api();
  GpuInfo gpu;
  gpu.index = int(index);
  char buffer[nvml::kBufferSize] = {};
  if (api.device_uuid(device, buffer, sizeof buffer) == nvml::kSuccess) gpu.uuid = buffer;
  buffer[0] = '\0';
  if (api.device_name(device, buffer, sizeof buffer) == nvml::kSuccess) gpu.name = buffer;
  nvml::Memory memory{};
  if (api.device_memory(device, &memory) == nvml::kSuccess) {
    gpu.memory_total = memory.total;
    gpu.memory_used = memory.used;
  }
  int major = 0, minor = 0;
  if (api.device_compute_capability &&
      api.device_compute_capability(device, &major, &minor) == nvml::kSuccess) {
    gpu.compute_capability = std::to_string(major) + "." + std::to_string(minor);
    unsigned cores = 0;
    if (api.device_num_cores && api.device_num_cores(device, &cores) == nvml::kSuccess) {
      gpu.sm_count = sm_count_from_cores(cores, major, minor);
    }
  }
  unsigned current = 0, pending = 0;
  gpu.mig_mode = "n/a";
  if (api.device_mig_mode && api.device_mig_mode(device, &current, &pending) == nvml::kSuccess) {
    gpu.mig_mode = current ? "enabled" : "disabled";
  }
  int compute_mode = -1;
  if (api.device_compute_mode && api.device_compute_mode(device, &compute_mode) == nvml::kSuccess) {
    gpu.compute_mode = compute_mode_name(compute_mode);
  }
  gpu.processes = device_processes(lib, device);
  return gpu;
}

}  // namespace

int sm_count_from_cores(unsigned cuda_cores, int cc_major, int cc_minor) {
  int per_sm = 0;
  if (cc_major == 6) per_sm = cc_minor == 0 ? 64 : 128;
  else if (cc_major == 7 || (cc_major == 8 && cc_minor == 0)) per_sm = 64;
  else if (cc_major >= 8) per_sm = 128;  // 8.6, 8.7, 8.9, 9.0 (Hopper), 10.x, 12.x
  return per_sm ? int(cuda_cores / unsigned(per_sm)) : 0;
}

MachineInventory discover_machine() {
  MachineInventory inventory;
  inventory.cpus = allowed_cpus();
  inventory.host_memory_bytes = host_memory_total();
  inventory.mps = find_mps_processes();
  std::string why;
  std::shared_ptr<nvml::Library> lib = nvml::Library::open(&why);
  if (!lib) {
    inventory.nvml_status = why;
    return inventory;
  }
  inventory.nvml_loaded = true;
  const nvml::Api& api = lib->api();
  char version[nvml::kBufferSize] = {};
  if (api.driver_version && api.driver_version(version, sizeof version) == nvml::kSuccess) {
    inventory.driver_version = version;
  }
  unsigned count = 0;
  if (nvml::Return r = api.device_count(&count); r != nvml::kSuccess) {
    inventory.nvml_status = "NVML could not count GPUs: " + lib->error(r);
    return inventory;
  }
  for (unsigned i = 0; i < count; ++i) {
    nvml::Device device = nullptr;
    if (api.device_by_index(i, &device) != nvml::kSuccess) continue;
    inventory.gpus.push_back(read_gpu(*lib, i, device));
  }
  if (inventory.gpus.empty()) inventory.nvml_status = "NVML sees no GPU";
  return inventory;
}

std::vector<GpuProcess> gpu_processes(const std::string& uuid) {
  std::shared_ptr<nvml::Library> lib = nvml::Library::open(nullptr);
  if (!lib) return {};
  unsigned count = 0;
  if (lib->api().device_count(&count) != nvml::kSuccess) return {};
  for (unsigned i = 0; i < count; ++i) {
    nvml::Device device = nullptr;
    char buffer[nvml::kBufferSize] = {};
    if (lib->api().device_by_index(i, &device) != nvml::kSuccess) continue;
    if (lib->api().device_uuid(device, buffer, sizeof buffer) != nvml::kSuccess) continue;
    if (uuid == buffer) return device_processes(*lib, device);
  }
  return {};
}

Json inventory_to_json(const MachineInventory& inventory) {
  Json gpus = Json::array();
  for (const GpuInfo& g : inventory.gpus) {
    Json processes = Json::array();
    for (const GpuProcess& p : g.processes) {
      processes.push_back({{"pid", p.pid}, {"used_bytes", p.used_bytes}, {"name", p.name}});
    }
    gpus.push_back({{"index", g.index}, {"uuid", g.uuid}, {"name", g.name},
                    {"memory_total_bytes", g.memory_total}, {"memory_used_bytes", g.memory_used},
                    {"sm_count", g.sm_count}, {"compute_capability", g.compute_capability},
                    {"mig_mode", g.mig_mode}, {"compute_mode", g.compute_mode},
                    {"processes", processes}});
  }
  Json mps = Json::array();
  for (const MpsProcessSeen& m : inventory.mps) {
    mps.push_back({{"pid", m.pid}, {"kind", m.kind}, {"pipe_dir", m.pipe_dir}});
  }
  Json cpu = {{"cpus", inventory.cpus}, {"memory_bytes", inventory.host_memory_bytes}};
  return {{"nvml", inventory.nvml_loaded}, {"nvml_status", inventory.nvml_status},
          {"driver_version", inventory.driver_version}, {"gpus", gpus}, {"mps", mps},
          {"cpu", cpu}};
}

std::string format_inventory(const MachineInventory& inventory) {
  std::ostringstream out;
  if (inventory.gpus.empty()) {
    out << "No NVIDIA GPU: " << inventory.nvml_status << ".\n"
        << "Nodes run on the CPU: one \"GPU\" made of " << inventory.cpus.size() << " core(s) and "
        << format_bytes(inventory.host_memory_bytes) << " of memory.\n";
  } else {
    out << "Driver " << inventory.driver_version << ", " << inventory.gpus.size() << " GPU(s)\n\n";
    char line[256];
    std::snprintf(line, sizeof line, "%-3s %-40s %-22s %10s %10s %4s %4s %-9s %-17s\n", "GPU",
                  "UUID", "NAME", "MEMORY", "USED", "SMS", "CC", "MIG", "COMPUTE MODE");
    out << line;
    for (const GpuInfo& g : inventory.gpus) {
      std::snprintf(line, sizeof line, "%-3d %-40s %-22s %10s %10s %4s %4s %-9s %-17s\n", g.index,
                    g.uuid.c_str(), g.name.c_str(), format_bytes(g.memory_total).c_str(),
                    format_bytes(g.memory_used).c_str(),
                    g.sm_count ? std::to_string(g.sm_count).c_str() : "?",
                    g.compute_capability.c_str(), g.mig_mode.c_str(), g.compute_mode.c_str());
      out << line;
    }
    out << "\nProcesses:\n";
    bool any = false;
    for (const GpuInfo& g : inventory.gpus) {
      for (const GpuProcess& p : g.processes) {
        out << "  GPU " << g.index << "  pid " << p.pid << "  " << format_bytes(p.used_bytes) << "  "
            << (p.name.empty() ? "?" : p.name) << "\n";
        any = true;
      }
    }
    if (!any) out << "  none\n";
  }
  out << "\nMPS daemons:\n";
  if (inventory.mps.empty()) out << "  none\n";
  for (const MpsProcessSeen& m : inventory.mps) {
    out << "  " << m.kind << "  pid " << m.pid
        << (m.pipe_dir.empty() ? "" : "  pipe " + m.pipe_dir) << "\n";
  }
  return out.str();
}

}  // namespace gpufrac
