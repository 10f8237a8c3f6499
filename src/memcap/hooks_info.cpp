// Interposed memory reports: cuMemGetInfo and cuDeviceTotalMem (both variants) and NVML's
// nvmlDeviceGetMemoryInfo(_v2) say what the process may use: total = the cap (or the device, if
// smaller), free = cap minus what the tenant holds (or the device's free memory, if smaller),
// never below zero (a pooled device: free is also at most what its pool lets the tenant grow by).
// Without a cap they report the driver's numbers untouched. cuInit is interposed to refuse CUDA
// early, with the reason on stderr, when the cap cannot be enforced, and to join the pools of
// pooled devices (refusing CUDA when the floors no longer fit).
//
// NVML numbers devices by itself, CUDA by CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER. Once this
// process has initialized CUDA, an NVML device is matched to its CUDA ordinal by UUID. Before
// that the shim must not initialize CUDA itself (programs such as vLLM query NVML precisely so
// that CUDA stays uninitialized until they fork their workers), so it reads CUDA_VISIBLE_DEVICES:
// UUID entries match exactly; index entries (or no variable) are taken as NVML indices, which is
// CUDA's order too on machines with identical GPUs or with CUDA_DEVICE_ORDER=PCI_BUS_ID.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <atomic>

#include "memcap/hook_table.h"
#include "memcap/shim.h"

using namespace gpufrac::memcap;

namespace {

constexpr int kCachedNvmlDevices = 64;
constinit std::atomic<nvmlDevice_t> g_nvml_handles[kCachedNvmlDevices] = {};
constinit std::atomic<int> g_nvml_ordinals[kCachedNvmlDevices] = {};  // ordinal + 1; 0 = unknown
constinit std::atomic<pid_t> g_cuda_initialized_by{0};  // the pid whose cuInit succeeded

int cuda_ordinal_by_uuid(const char* nvml_uuid) {
  const char* hex = strchr(nvml_uuid, '-');  // "GPU-..." or "MIG-..."
  if (hex == nullptr) return -1;
  ++hex;
  auto count_devices = REAL(cuDeviceGetCount);
  auto get_device = REAL(cuDeviceGet);
  auto get_uuid = REAL(cuDeviceGetUuid_v2);
  if (get_uuid == nullptr) get_uuid = REAL(cuDeviceGetUuid);
  int count = 0;
  if (count_devices == nullptr || get_device == nullptr || get_uuid == nullptr ||
      count_devices(&count) != CUDA_SUCCESS) {
    return -1;
  }
  for (int i = 0; i < count; ++i) {
    CUdevice device = -1;
    CUuuid uuid;
    char text[48];
    if (get_device(&device, i) != CUDA_SUCCESS || get_uuid(&uuid, device) != CUDA_SUCCESS) {
      continue;
    }
    format_uuid(uuid, text, sizeof text);
    if (strcasecmp(text, hex) == 0) return device;
  }
  return -1;
}

// Position of the NVML device in CUDA_VISIBLE_DEVICES (see the file comment), or -1.
int visible_ordinal(const char* nvml_uuid, unsigned nvml_index) {
  const char* visible = getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr) return int(nvml_index);
  int position = 0;
  for (const char* entry = visible; *entry != '\0'; ++position) {
    size_t length = strcspn(entry, ",");
    if (length == 0) return -1;  // CUDA stops at an invalid entry
    if (strncasecmp(entry, "GPU-", 4) == 0 || strncasecmp(entry, "MIG-", 4) == 0) {
      if (strncasecmp(nvml_uuid, entry, length) == 0) return position;  // a UUID or its prefix
    } else {
      char* end = nullptr;
      unsigned long index = strtoul(entry, &end, 10);
      if (end != entry + length) return -1;
      if (index == nvml_index) return position;
    }
    entry += length;
    if (*entry == ',') ++entry;
  }
  return -1;
}

// The CUDA ordinal of an NVML device, or -1 if CUDA does not show it to this process.
int cuda_ordinal(nvmlDevice_t device) {
  for (int i = 0; i < kCachedNvmlDevices; ++i) {
    if (g_nvml_handles[i].load() == device) {
      int known = g_nvml_ordinals[i].load();
      if (known != 0) return known - 1;
    }
  }
  auto get_uuid = REAL(nvmlDeviceGetUUID);
  auto get_index = REAL(nvmlDeviceGetIndex);
  char uuid[96];
  unsigned index = 0;
  if (get_uuid == nullptr || get_uuid(device, uuid, sizeof uuid) != NVML_SUCCESS) return -1;
  if (g_cuda_initialized_by.load() != getpid()) {
    if (get_index == nullptr || get_index(device, &index) != NVML_SUCCESS) return -1;
    return visible_ordinal(uuid, index);  // not cached: CUDA may be initialized later
  }
  int ordinal = cuda_ordinal_by_uuid(uuid);
  for (int i = 0; i < kCachedNvmlDevices; ++i) {
    nvmlDevice_t empty = nullptr;
    if (g_nvml_handles[i].compare_exchange_strong(empty, device) || empty == device) {
      g_nvml_ordinals[i].store(ordinal + 1);
      break;
    }
  }
  return ordinal;
}

// Clamps an NVML report. Memory in use stays "used" as far as it fits; with _v2, what is left of
// the clamped in-use amount stays "reserved" (memory the driver keeps for itself).
void clamp_nvml(nvmlDevice_t device, unsigned long long* total, unsigned long long* free,
                unsigned long long* used, unsigned long long* reserved) {
  uint64_t clamped_total = *total;
  uint64_t clamped_free = *free;
  clamp_report(cuda_ordinal(device), &clamped_free, &clamped_total);
  uint64_t taken = clamped_total - clamped_free;
  uint64_t in_use = reserved != nullptr && *used < taken ? *used : taken;
  if (reserved != nullptr) *reserved = taken - in_use;
  *total = clamped_total;
  *free = clamped_free;
  *used = in_use;
}

// cuMemGetInfo and cuDeviceTotalMem in either width (the _v2 size_t and the pre-_v2 unsigned int
// variants): the driver's report with the cap applied. Clamping only ever lowers the numbers,
// so a 32-bit report still fits.
template <typename Bytes>
CUresult capped_mem_info(CUresult (*real)(Bytes*, Bytes*), Bytes* free_bytes, Bytes* total_bytes) {
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (!cap_requested()) return real(free_bytes, total_bytes);
  if (CUresult refused = ensure_ready(); refused != CUDA_SUCCESS) return refused;
  CUresult result = real(free_bytes, total_bytes);
  if (result != CUDA_SUCCESS || free_bytes == nullptr || total_bytes == nullptr) return result;
  uint64_t free = *free_bytes;
  uint64_t total = *total_bytes;
  clamp_report(current_device(), &free, &total);
  *free_bytes = Bytes(free);
  *total_bytes = Bytes(total);
  return result;
}

template <typename Bytes>
CUresult capped_total_mem(CUresult (*real)(Bytes*, CUdevice), Bytes* bytes, CUdevice device) {
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (!cap_requested()) return real(bytes, device);
  if (CUresult refused = ensure_ready(); refused != CUDA_SUCCESS) return refused;
  CUresult result = real(bytes, device);
  if (result != CUDA_SUCCESS || bytes == nullptr) return result;
  uint64_t total = *bytes;
  uint64_t free = total;
  clamp_report(device, &free, &total);
  *bytes = Bytes(total);
  return result;
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned int flags) {
  auto real = REAL(cuInit);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (cap_requested()) {
    if (CUresult refused = ensure_ready(); refused != CUDA_SUCCESS) return refused;
  }
  CUresult result = real(flags);
  if (result != CUDA_SUCCESS) return result;
  g_cuda_initialized_by.store(getpid());
  return cap_requested() ? join_pools() : result;
}

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  return capped_mem_info(REAL(cuMemGetInfo_v2), free_bytes, total_bytes);
}

CUresult cuMemGetInfo(unsigned int* free_bytes, unsigned int* total_bytes) {
  return capped_mem_info(REAL(cuMemGetInfo), free_bytes, total_bytes);
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) {
  return capped_total_mem(REAL(cuDeviceTotalMem_v2), bytes, device);
}

CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice device) {
  return capped_total_mem(REAL(cuDeviceTotalMem), bytes, device);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  auto real = REAL(nvmlDeviceGetMemoryInfo);
  if (real == nullptr) return NVML_ERROR_UNINITIALIZED;
  if (!cap_requested()) return real(device, memory);
  if (ensure_ready() != CUDA_SUCCESS) return NVML_ERROR_NO_PERMISSION;
  nvmlReturn_t result = real(device, memory);
  if (result != NVML_SUCCESS || memory == nullptr) return result;
  clamp_nvml(device, &memory->total, &memory->free, &memory->used, nullptr);
  return result;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  auto real = REAL(nvmlDeviceGetMemoryInfo_v2);
  if (real == nullptr) return NVML_ERROR_UNINITIALIZED;
  if (!cap_requested()) return real(device, memory);
  if (ensure_ready() != CUDA_SUCCESS) return NVML_ERROR_NO_PERMISSION;
  nvmlReturn_t result = real(device, memory);
  if (result != NVML_SUCCESS || memory == nullptr) return result;
  clamp_nvml(device, &memory->total, &memory->free, &memory->used, &memory->reserved);
  return result;
}

}  // extern "C"
