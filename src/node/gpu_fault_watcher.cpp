#include "node/gpu_fault_watcher.h"

#include "common/log.h"
#include "node/nvml.h"

namespace gpufrac {

GpuFaultWatcher::GpuFaultWatcher(std::vector<std::string> gpu_uuids,
                                 std::function<void(size_t, uint64_t)> on_fault)
    : uuids_(std::move(gpu_uuids)), on_fault_(std::move(on_fault)) {
  if (uuids_.empty()) return;
  std::shared_ptr<nvml::Library> lib = nvml::Library::open(nullptr);
  if (!lib) return;
  const nvml::Api& api = lib->api();
  if (!api.event_set_create || !api.register_events || !api.event_set_wait || !api.event_set_free) {
    log_warn("NVML has no event API here: GPU faults are detected by client exits only");
    return;
  }
  nvml::EventSet set = nullptr;
  if (api.event_set_create(&set) != nvml::kSuccess) return;
  unsigned count = 0;
  api.device_count(&count);
  devices_.assign(uuids_.size(), nullptr);
  bool any = false;
  for (unsigned i = 0; i < count; ++i) {
    nvml::Device device = nullptr;
    char uuid[nvml::kBufferSize] = {};
    if (api.device_by_index(i, &device) != nvml::kSuccess) continue;
    if (api.device_uuid(device, uuid, sizeof uuid) != nvml::kSuccess) continue;
    for (size_t k = 0; k < uuids_.size(); ++k) {
      if (uuids_[k] != uuid) continue;
      if (nvml::Return r = api.register_events(device, nvml::kEventTypeXidCriticalError, set);
          r != nvml::kSuccess) {
        log_warn("NVML cannot report Xid errors for ", uuid, ": ", lib->error(r));
        continue;
      }
      devices_[k] = device;
      any = true;
    }
  }
  if (!any) {
    api.event_set_free(set);
    return;
  }
  event_set_ = set;
  thread_ = std::thread([this] { run(); });
}

GpuFaultWatcher::~GpuFaultWatcher() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (event_set_) {
    if (std::shared_ptr<nvml::Library> lib = nvml::Library::open(nullptr)) {
      lib->api().event_set_free(static_cast<nvml::EventSet>(event_set_));
    }
  }
}

void GpuFaultWatcher::run() {
  std::shared_ptr<nvml::Library> lib = nvml::Library::open(nullptr);
  while (!stop_) {
    nvml::EventData data{};
    nvml::Return r = lib->api().event_set_wait(static_cast<nvml::EventSet>(event_set_), &data, 500);
    if (r == nvml::kErrorTimeout) continue;
    if (r != nvml::kSuccess) {
      log_warn("NVML event wait failed (", lib->error(r), "); GPU fault watching stops");
      return;
    }
    for (size_t k = 0; k < devices_.size(); ++k) {
      if (devices_[k] != data.device) continue;
      log_error("GPU ", uuids_[k], " reported Xid ", data.event_data);
      on_fault_(k, data.event_data);
    }
  }
}

}  // namespace gpufrac
