// A fake CUDA driver (built as libcuda.so.1) and a fake NVML (libnvidia-ml.so.1) for tests on
// machines without a GPU. They implement, on host memory, the driver entry points a CUDA program
// uses to allocate and query memory: contexts, cuMemAlloc*, virtual memory (cuMemCreate/Map),
// stream-ordered allocation and pools, cuMemGetInfo, cuGetProcAddress(_v2) with versioned
// variants; and NVML's memory queries. Like a GPU, a device has a fixed size and allocations past
// it fail with CUDA_ERROR_OUT_OF_MEMORY.
//
// Configured by environment (read at cuInit / nvmlInit):
//   FAKE_CUDA_DEVICES        number of devices [2]
//   FAKE_CUDA_TOTAL_BYTES    size of each device in bytes [4 GiB]
//   FAKE_CUDA_OTHERS_BYTES   memory "other processes" use on each device (not allocatable) [0]
//   FAKE_CUDA_SHARED_FILE    a file holding the devices' usage, so that processes share one set
//                            of devices as they share a real GPU; records the peak usage too
//   FAKE_CUDA_ALLOC_DELAY_US sleep inside each allocation (widens races in stress tests) [0]
//   FAKE_CUDA_PROC_TABLE     "private": cuGetProcAddress hands out internal pointers rather than
//                            the exported symbols (a real driver may do either)
//   FAKE_CUDA_NEWER_MEMALLOC 1: cuGetProcAddress("cuMemAlloc", >= 13000) hands out a variant no
//                            interposer knows (as a future driver's cuMemAlloc_v3 would be)
// NVML numbers the devices in the reverse order of CUDA, as a real machine may.
#pragma once

#include <stdint.h>

#include <atomic>

#include "memcap/cuda_abi.h"

inline constexpr int kFakeMaxDevices = 8;
inline constexpr uint64_t kFakeGranularity = uint64_t(2) << 20;

// The layout of FAKE_CUDA_SHARED_FILE.
struct FakeDeviceUsage {
  std::atomic<uint64_t> used[kFakeMaxDevices];
  std::atomic<uint64_t> peak[kFakeMaxDevices];
};

// The UUID of fake CUDA device `device`; NVML prints it as "GPU-xxxxxxxx-xxxx-...".
inline CUuuid fake_device_uuid(int device) {
  CUuuid uuid = {{0x6a, 0x0f, 0x2c, 0x41, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x08, 0x09,
                  0x0a, 0x0b, char(device)}};
  return uuid;
}

extern "C" {

#ifndef __cuda_cuda_h__
typedef int CUmemAllocationGranularity_flags;
typedef struct CUmemAccessDesc_st {
  CUmemLocation location;
  int flags;
} CUmemAccessDesc;
#endif

#pragma GCC visibility push(default)
// Driver entry points the fake implements beyond those in memcap/cuda_abi.h.
CUresult cuDriverGetVersion(int* version);
CUresult cuDeviceGetName(char* name, int length, CUdevice device);
CUresult cuCtxCreate_v2(CUcontext* context, unsigned int flags, CUdevice device);
CUresult cuCtxSetCurrent(CUcontext context);
CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags option);
CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags);
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size);
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count);
CUresult cuStreamCreate(CUstream* stream, unsigned int flags);
CUresult cuStreamDestroy_v2(CUstream stream);
CUresult cuStreamGetDevice_ptsz(CUstream stream, CUdevice* device);
CUresult cuMemPoolDestroy(CUmemoryPool pool);
// A variant of cuMemAlloc that no interposer knows, as a future driver might add (hypothetical:
// CUDA 13 has none); handed out only with FAKE_CUDA_NEWER_MEMALLOC, exported always.
CUresult cuMemAlloc_v3(CUdeviceptr* dptr, size_t bytes, unsigned int flags);
// Not a driver function: whether cuInit has run in this process (tests check who initialized).
int fake_cuda_initialized(void);

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device);
#pragma GCC visibility pop

}  // extern "C"

// Shared by the two fakes: the environment above, read once per process.
struct FakeGpuConfig {
  int devices;
  uint64_t total_bytes;
  uint64_t others_bytes;
  uint64_t alloc_delay_us;
  bool private_proc_table;
  bool newer_memalloc;
  FakeDeviceUsage* usage;  // shared file, or this process's own
};
const FakeGpuConfig& fake_gpu_config();
