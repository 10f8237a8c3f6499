#include "node/nvml.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace gpufrac::nvml {
namespace {

template <typename F>
void bind(void* handle, F& slot, const char* name) {
  slot = reinterpret_cast<F>(dlsym(handle, name));
}

}  // namespace

std::shared_ptr<Library> Library::open(std::string* why) {
  // One load per process: nvmlInit is reference counted and cheap to keep.
  static std::mutex mutex;
  static std::shared_ptr<Library> loaded;
  static std::string load_error;
  std::lock_guard lock(mutex);
  if (loaded || !load_error.empty()) {
    if (!loaded && why) *why = load_error;
    return loaded;
  }
  const char* override_path = std::getenv("GPUFRAC_NVML_LIBRARY");
  std::string path = override_path && *override_path ? override_path : "libnvidia-ml.so.1";
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    load_error = "no NVIDIA driver (" + path + " not loadable: " + dlerror() + ")";
    if (why) *why = load_error;
    return nullptr;
  }
  std::shared_ptr<Library> lib(new Library());
  lib->handle_ = handle;
  Api& a = lib->api_;
  bind(handle, a.init, "nvmlInit_v2");
  bind(handle, a.error_string, "nvmlErrorString");
  bind(handle, a.driver_version, "nvmlSystemGetDriverVersion");
  bind(handle, a.device_count, "nvmlDeviceGetCount_v2");
  bind(handle, a.device_by_index, "nvmlDeviceGetHandleByIndex_v2");
  bind(handle, a.device_name, "nvmlDeviceGetName");
  bind(handle, a.device_uuid, "nvmlDeviceGetUUID");
  bind(handle, a.device_memory, "nvmlDeviceGetMemoryInfo");
  bind(handle, a.device_num_cores, "nvmlDeviceGetNumGpuCores");
  bind(handle, a.device_compute_capability, "nvmlDeviceGetCudaComputeCapability");
  bind(handle, a.device_mig_mode, "nvmlDeviceGetMigMode");
  bind(handle, a.device_compute_mode, "nvmlDeviceGetComputeMode");
  bind(handle, a.device_processes, "nvmlDeviceGetComputeRunningProcesses_v3");
  bind(handle, a.event_set_create, "nvmlEventSetCreate");
  bind(handle, a.register_events, "nvmlDeviceRegisterEvents");
  bind(handle, a.event_set_wait, "nvmlEventSetWait_v2");
  bind(handle, a.event_set_free, "nvmlEventSetFree");
  if (!a.init || !a.device_count || !a.device_by_index || !a.device_name || !a.device_uuid ||
      !a.device_memory) {
    load_error = path + " lacks the NVML entry points gpufrac needs (driver too old?)";
  } else if (Return r = a.init(); r != kSuccess) {
    load_error = "NVML did not initialise: " + lib->error(r);
  }
  if (!load_error.empty()) {
    dlclose(handle);
    if (why) *why = load_error;
    return nullptr;
  }
  loaded = lib;
  return loaded;
}

std::string Library::error(Return code) const {
  if (api_.error_string) {
    if (const char* text = api_.error_string(code)) return text;
  }
  return "NVML error " + std::to_string(code);
}

}  // namespace gpufrac::nvml
