// Watches NVML for critical Xid errors (illegal address, MMU fault, GPU stopped, ...) on the GPUs of
// a node's `fractions` devices, so that every MPS client of a faulted GPU is restarted at once:
// a fatal error in one client reaches all clients of that GPU (docs/architecture.md, "Sharing modes").
//
// One thread waits on an NVML event set (500 ms timeouts, so destruction is prompt). Without NVML
// events (no driver, an old driver, a fake in tests) the watcher is inactive and the supervisor's
// process-exit rule alone applies. Thread-safe; on_fault runs on the watcher thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace gpufrac {

class GpuFaultWatcher {
 public:
  // on_fault(index into `gpu_uuids`, xid).
  GpuFaultWatcher(std::vector<std::string> gpu_uuids, std::function<void(size_t, uint64_t)> on_fault);
  ~GpuFaultWatcher();
  GpuFaultWatcher(const GpuFaultWatcher&) = delete;
  GpuFaultWatcher& operator=(const GpuFaultWatcher&) = delete;

  bool active() const { return thread_.joinable(); }

 private:
  void run();
  std::vector<std::string> uuids_;
  std::vector<void*> devices_;  // nvml::Device per uuid
  void* event_set_ = nullptr;
  std::function<void(size_t, uint64_t)> on_fault_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace gpufrac
