// The fake NVML (libnvidia-ml.so.1): the memory queries of the fake GPU (see fake_libcuda.h).
// NVML index i is CUDA device (count - 1 - i); memory used is what the fake driver's processes
// hold (shared through FAKE_CUDA_SHARED_FILE) plus FAKE_CUDA_OTHERS_BYTES.
#include <stdio.h>

#include "fakes/fake_libcuda.h"

namespace {

struct FakeNvmlDevice {
  int cuda_device;
};

FakeNvmlDevice g_devices[kFakeMaxDevices];
bool g_initialized = false;

FakeNvmlDevice* fake(nvmlDevice_t device) {
  return reinterpret_cast<FakeNvmlDevice*>(device);
}

void read_memory(nvmlDevice_t device, unsigned long long* total, unsigned long long* free,
                 unsigned long long* used) {
  const FakeGpuConfig& gpu = fake_gpu_config();
  uint64_t taken = gpu.usage->used[fake(device)->cuda_device].load() + gpu.others_bytes;
  if (taken > gpu.total_bytes) taken = gpu.total_bytes;
  *total = gpu.total_bytes;
  *used = taken;
  *free = gpu.total_bytes - taken;
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2(void) {
  int count = fake_gpu_config().devices;
  for (int i = 0; i < count; ++i) g_devices[i].cuda_device = count - 1 - i;
  g_initialized = true;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
  g_initialized = false;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  *count = unsigned(fake_gpu_config().devices);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  if (index >= unsigned(fake_gpu_config().devices) || device == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  *device = reinterpret_cast<nvmlDevice_t>(&g_devices[index]);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  *index = unsigned(fake(device) - g_devices);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  CUuuid bytes = fake_device_uuid(fake(device)->cuda_device);
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.bytes);
  snprintf(uuid, length, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
           b[14], b[15]);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  read_memory(device, &memory->total, &memory->free, &memory->used);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != GPUFRAC_NVML_MEMORY_V2_VERSION) {
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  }
  read_memory(device, &memory->total, &memory->free, &memory->used);
  memory->reserved = 256ull << 20;  // the driver's own share, reported apart from "used"
  memory->free = memory->free > memory->reserved ? memory->free - memory->reserved : 0;
  return NVML_SUCCESS;
}

}  // extern "C"
