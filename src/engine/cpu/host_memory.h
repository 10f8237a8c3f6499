// How much host memory this process may still allocate: the CPU runner's device memory, from
// which `--memory-budget auto` sizes the KV pool. The smallest of MemAvailable (/proc/meminfo),
// the cgroup v2 limit minus the cgroup's usage, and RLIMIT_DATA minus this process's data segment
// (VmData) — the last is the cap a CPU node gives each model. Reads /proc and /sys on each call.
#pragma once

#include <cstdint>

namespace gpufrac::engine {

uint64_t host_available_memory_bytes();

}  // namespace gpufrac::engine
