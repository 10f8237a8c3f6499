#include "engine/cpu/host_memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "common/strings.h"

namespace gpufrac::engine {
namespace {

constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();

// A number from a one-line cgroup file, or kUnlimited for "max" / no such file.
uint64_t read_cgroup_number(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return kUnlimited;
  try {
    return std::stoull(text);
  } catch (const std::exception&) {
    return kUnlimited;
  }
}

// The value of a "Name:   1234 kB" line of a /proc file, in bytes; 0 when absent.
uint64_t read_proc_kib(const char* path, const std::string& name) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!starts_with(line, name)) continue;
    std::istringstream fields(line.substr(name.size()));
    uint64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

uint64_t headroom(uint64_t limit, uint64_t used) {
  return used > limit ? 0 : limit - used;
}

}  // namespace

uint64_t host_available_memory_bytes() {
  uint64_t available = read_proc_kib("/proc/meminfo", "MemAvailable:");
  uint64_t cgroup_limit = read_cgroup_number("/sys/fs/cgroup/memory.max");
  if (cgroup_limit != kUnlimited) {
    uint64_t used = read_cgroup_number("/sys/fs/cgroup/memory.current");
    available = std::min(available, used == kUnlimited ? 0 : headroom(cgroup_limit, used));
  }
  rlimit data{};
  if (getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY) {
    available =
        std::min(available, headroom(data.rlim_cur, read_proc_kib("/proc/self/status", "VmData:")));
  }
  return available;
}

}  // namespace gpufrac::engine
