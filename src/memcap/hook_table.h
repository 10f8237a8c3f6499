// The driver and NVML entry points the shim interposes, and the ones it only calls, with the
// names a program reaches them by:
//   - the exported, versioned symbol ("cuMemAlloc_v2"), found by the dynamic linker (the shim is
//     preloaded, so its definition wins) or by dlsym on a libcuda handle;
//   - the base name plus a CUDA version and per-thread-stream flag that cuGetProcAddress takes
//     ("cuMemAlloc", 12000) -> the variant with the highest min_version <= that version.
// real_function() finds the driver's own implementation: dlsym on libcuda.so.1 /
// libnvidia-ml.so.1 (loaded if the process has not yet), never the shim's symbol.
//
// Thread-safe; real functions are resolved once, lazily.
#pragma once

#include "memcap/cuda_abi.h"

namespace gpufrac::memcap {

// X(symbol, base name for cuGetProcAddress, lowest CUDA version with this variant,
//   per-thread-default-stream variant, library, interposed by the shim)
#define GPUFRAC_MEMCAP_ENTRY_POINTS(X)                                                     \
  X(cuInit, "cuInit", 2000, false, kCuda, true)                                            \
  X(cuGetProcAddress, "cuGetProcAddress", 11030, false, kCuda, true)                       \
  X(cuGetProcAddress_v2, "cuGetProcAddress", 12000, false, kCuda, true)                    \
  X(cuMemAlloc, "cuMemAlloc", 2000, false, kCuda, true)                                    \
  X(cuMemAlloc_v2, "cuMemAlloc", 3020, false, kCuda, true)                                 \
  X(cuMemAllocPitch, "cuMemAllocPitch", 2000, false, kCuda, true)                          \
  X(cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, false, kCuda, true)                       \
  X(cuMemAllocManaged, "cuMemAllocManaged", 6000, false, kCuda, true)                      \
  X(cuMemFree, "cuMemFree", 2000, false, kCuda, true)                                      \
  X(cuMemFree_v2, "cuMemFree", 3020, false, kCuda, true)                                   \
  X(cuMemGetInfo, "cuMemGetInfo", 2000, false, kCuda, true)                                \
  X(cuMemGetInfo_v2, "cuMemGetInfo", 3020, false, kCuda, true)                             \
  X(cuDeviceTotalMem, "cuDeviceTotalMem", 2000, false, kCuda, true)                        \
  X(cuDeviceTotalMem_v2, "cuDeviceTotalMem", 3020, false, kCuda, true)                     \
  X(cuMemCreate, "cuMemCreate", 10020, false, kCuda, true)                                 \
  X(cuMemRelease, "cuMemRelease", 10020, false, kCuda, true)                               \
  X(cuMemRetainAllocationHandle, "cuMemRetainAllocationHandle", 11000, false, kCuda, true) \
  X(cuMemMap, "cuMemMap", 10020, false, kCuda, true)                                       \
  X(cuMemUnmap, "cuMemUnmap", 10020, false, kCuda, true)                                   \
  X(cuMemAllocAsync, "cuMemAllocAsync", 11020, false, kCuda, true)                         \
  X(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 11020, true, kCuda, true)                     \
  X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, false, kCuda, true)         \
  X(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 11020, true, kCuda, true)     \
  X(cuMemFreeAsync, "cuMemFreeAsync", 11020, false, kCuda, true)                           \
  X(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 11020, true, kCuda, true)                       \
  X(cuMemPoolCreate, "cuMemPoolCreate", 11020, false, kCuda, true)                         \
  X(cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", 11020, false, kCuda, true)     \
  X(cuDeviceGetMemPool, "cuDeviceGetMemPool", 11020, false, kCuda, true)                   \
  X(cuMemGetDefaultMemPool, "cuMemGetDefaultMemPool", 13000, false, kCuda, true)           \
  X(cuMemGetMemPool, "cuMemGetMemPool", 13000, false, kCuda, true)                         \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000, false, kCuda, true)        \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease", 7000, false, kCuda, true)      \
  X(cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease", 11000, false, kCuda, true)  \
  X(cuDevicePrimaryCtxReset, "cuDevicePrimaryCtxReset", 7000, false, kCuda, true)          \
  X(cuDevicePrimaryCtxReset_v2, "cuDevicePrimaryCtxReset", 11000, false, kCuda, true)      \
  X(cuCtxDestroy, "cuCtxDestroy", 2000, false, kCuda, true)                                \
  X(cuCtxDestroy_v2, "cuCtxDestroy", 4000, false, kCuda, true)                             \
  X(nvmlDeviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo", 0, false, kNvml, true)             \
  X(nvmlDeviceGetMemoryInfo_v2, "nvmlDeviceGetMemoryInfo", 0, false, kNvml, true)          \
  X(cuCtxGetDevice, "cuCtxGetDevice", 2000, false, kCuda, false)                           \
  X(cuCtxGetCurrent, "cuCtxGetCurrent", 4000, false, kCuda, false)                         \
  X(cuStreamGetDevice, "cuStreamGetDevice", 12080, false, kCuda, false)                    \
  X(cuDevicePrimaryCtxGetState, "cuDevicePrimaryCtxGetState", 7000, false, kCuda, false)   \
  X(cuDeviceGetCount, "cuDeviceGetCount", 2000, false, kCuda, false)                       \
  X(cuDeviceGet, "cuDeviceGet", 2000, false, kCuda, false)                                 \
  X(cuDeviceGetUuid, "cuDeviceGetUuid", 9020, false, kCuda, false)                         \
  X(cuDeviceGetUuid_v2, "cuDeviceGetUuid", 11040, false, kCuda, false)                     \
  X(nvmlDeviceGetUUID, "nvmlDeviceGetUUID", 0, false, kNvml, false)                        \
  X(nvmlDeviceGetIndex, "nvmlDeviceGetIndex", 0, false, kNvml, false)

enum class EntryId : int {
#define GPUFRAC_MEMCAP_ENUM(symbol, base, version, per_thread, library, hooked) symbol,
  GPUFRAC_MEMCAP_ENTRY_POINTS(GPUFRAC_MEMCAP_ENUM)
#undef GPUFRAC_MEMCAP_ENUM
      kCount
};

enum class Library { kCuda, kNvml };

struct EntryPoint {
  const char* symbol;
  const char* base;
  int min_version;
  bool per_thread;
  Library library;
  void* hook;  // the shim's definition; nullptr for entry points the shim only calls
};

extern const EntryPoint kEntryPoints[int(EntryId::kCount)];

// The interposed entry point exported as `symbol`, or nullptr.
const EntryPoint* find_hook_by_symbol(const char* symbol);

// True for a name that looks like a variant of an interposed function that the shim does not
// know ("cuMemAlloc_v3", "cuMemCreate_ptsz"): handing it out would bypass the cap.
bool unknown_variant_of_hook(const char* symbol);

// The driver's (or NVML's) implementation; nullptr if the library or symbol is missing.
void* real_function(EntryId id);
inline void* real_function(const EntryPoint* entry) {
  return real_function(EntryId(entry - kEntryPoints));
}

using DlsymFunction = void* (*)(void*, const char*);
DlsymFunction real_dlsym();

}  // namespace gpufrac::memcap

// The driver's implementation of `name`, typed like it: REAL(cuMemAlloc_v2)(&ptr, bytes).
#define REAL(name)                     \
  reinterpret_cast<decltype(&::name)>( \
      ::gpufrac::memcap::real_function(::gpufrac::memcap::EntryId::name))
