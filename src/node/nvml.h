// NVML, loaded at run time with dlopen: gpufrac has no build or link dependency on the driver, and
// on a machine without one NvmlLibrary::open() says why and the node falls back to the CPU.
//
// Only the few entry points the node uses are declared here, with the driver's ABI (names,
// versioned symbols, struct layouts of nvml.h). GPUFRAC_NVML_LIBRARY overrides the library path
// (tests point it at a fake). NVML itself is thread-safe; so is this table once opened. The
// library stays loaded (and initialised) for the life of the process.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace gpufrac::nvml {

using Return = int;  // nvmlReturn_t
using Device = struct nvmlDevice_st*;
using EventSet = struct nvmlEventSet_st*;

constexpr Return kSuccess = 0;
constexpr Return kErrorNotSupported = 3;
constexpr Return kErrorInsufficientSize = 7;
constexpr Return kErrorTimeout = 10;
constexpr uint64_t kEventTypeXidCriticalError = 0x8;
constexpr unsigned kBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE, ..._NAME_V2_...

struct Memory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct ProcessInfo {  // nvmlProcessInfo_t (the _v2/_v3 layout)
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

struct EventData {  // nvmlEventData_t
  Device device;
  unsigned long long event_type;
  unsigned long long event_data;  // the Xid for Xid events
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

// The entry points; optional ones (older drivers, fakes) may be null.
struct Api {
  Return (*init)();                                        // nvmlInit_v2
  const char* (*error_string)(Return);                     // nvmlErrorString
  Return (*driver_version)(char*, unsigned);               // nvmlSystemGetDriverVersion
  Return (*device_count)(unsigned*);                       // nvmlDeviceGetCount_v2
  Return (*device_by_index)(unsigned, Device*);            // nvmlDeviceGetHandleByIndex_v2
  Return (*device_name)(Device, char*, unsigned);          // nvmlDeviceGetName
  Return (*device_uuid)(Device, char*, unsigned);          // nvmlDeviceGetUUID
  Return (*device_memory)(Device, Memory*);                // nvmlDeviceGetMemoryInfo
  Return (*device_num_cores)(Device, unsigned*);           // nvmlDeviceGetNumGpuCores (optional)
  Return (*device_compute_capability)(Device, int*, int*); // nvmlDeviceGetCudaComputeCapability
  Return (*device_mig_mode)(Device, unsigned*, unsigned*); // nvmlDeviceGetMigMode (optional)
  Return (*device_compute_mode)(Device, int*);             // nvmlDeviceGetComputeMode
  Return (*device_processes)(Device, unsigned*, ProcessInfo*);  // ...ComputeRunningProcesses_v3
  Return (*event_set_create)(EventSet*);                   // nvmlEventSetCreate (optional)
  Return (*register_events)(Device, unsigned long long, EventSet);  // nvmlDeviceRegisterEvents
  Return (*event_set_wait)(EventSet, EventData*, unsigned);          // nvmlEventSetWait_v2
  Return (*event_set_free)(EventSet);                                 // nvmlEventSetFree
};

class Library {
 public:
  // Loads and initialises NVML; nullptr with `why` set when the machine has no usable NVML.
  static std::shared_ptr<Library> open(std::string* why);
  const Api& api() const { return api_; }
  std::string error(Return code) const;  // nvmlErrorString, or "NVML error N"

 private:
  Library() = default;
  void* handle_ = nullptr;
  Api api_{};
};

}  // namespace gpufrac::nvml
