// A fake NVML (built as libfake_nvml_node.so) for the node runtime's CI tests: GPUs that
// `gpufrac gpus` lists and a node places models on, without a driver. Point GPUFRAC_NVML_LIBRARY
// at it. Configured by env:
//   FAKE_NVML_GPUS        number of GPUs [1]
//   FAKE_NVML_MEMORY_MIB  memory of each [143771, an H200]
// GPU i has UUID GPU-00000000-0000-0000-0000-00000000000<i>, name "Fake H200", 16896 CUDA cores at
// compute capability 9.0 (132 SMs), MIG disabled, compute mode default, no processes. The event
// API is absent, as on drivers without it (the node then watches client exits only).
// Only the entry points gpufrac's node uses, with NVML's C ABI (see src/node/nvml.h).
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

struct FakeDevice {
  unsigned index;
};
FakeDevice g_devices[16];

unsigned gpu_count() {
  const char* text = std::getenv("FAKE_NVML_GPUS");
  unsigned n = text ? unsigned(std::strtoul(text, nullptr, 10)) : 1;
  return n > 16 ? 16 : n;
}

unsigned long long memory_bytes() {
  const char* text = std::getenv("FAKE_NVML_MEMORY_MIB");
  unsigned long long mib = text ? std::strtoull(text, nullptr, 10) : 143771;
  return mib << 20;
}

FakeDevice* device_of(void* handle) { return static_cast<FakeDevice*>(handle); }

struct Memory {
  unsigned long long total, free, used;
};

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int nvmlInit_v2() {
  for (unsigned i = 0; i < 16; ++i) g_devices[i].index = i;
  return kSuccess;
}

__attribute__((visibility("default"))) const char* nvmlErrorString(int code) {
  return code == kSuccess ? "Success" : "Fake NVML error";
}

__attribute__((visibility("default"))) int nvmlSystemGetDriverVersion(char* version, unsigned length) {
  std::snprintf(version, length, "999.99-fake");
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = gpu_count();
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (index >= gpu_count()) return kInvalidArgument;
  *device = &g_devices[index];
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetName(void* device, char* name, unsigned length) {
  (void)device;
  std::snprintf(name, length, "Fake H200");
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetUUID(void* device, char* uuid, unsigned length) {
  std::snprintf(uuid, length, "GPU-00000000-0000-0000-0000-%012u", device_of(device)->index);
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(void* device, Memory* memory) {
  (void)device;
  memory->total = memory_bytes();
  memory->used = 512ull << 20;
  memory->free = memory->total - memory->used;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetNumGpuCores(void* device, unsigned* cores) {
  (void)device;
  *cores = 16896;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetCudaComputeCapability(void* device, int* major, int* minor) {
  (void)device;
  *major = 9;
  *minor = 0;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetMigMode(void* device, unsigned* current, unsigned* pending) {
  (void)device;
  *current = *pending = 0;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetComputeMode(void* device, int* mode) {
  (void)device;
  *mode = 0;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned* count,
                                                                                   void* infos) {
  (void)device;
  (void)infos;
  *count = 0;
  return kSuccess;
}

}  // extern "C"
