// The fake driver's cuGetProcAddress / cuGetProcAddress_v2: a base name plus a CUDA version and
// stream flags select a versioned variant, as in the real driver (the highest variant introduced
// at or before the version; per-thread-stream variants with CU_GET_PROC_ADDRESS_PER_THREAD_
// DEFAULT_STREAM). With FAKE_CUDA_PROC_TABLE=private the pointers handed out are internal
// trampolines, not the exported symbols. Also defines the older variants of a few entry points
// (cuDevicePrimaryCtxRelease, ...), which exist to be handed out for an older version.
#include <string.h>

#include "fakes/fake_libcuda.h"

namespace {

constexpr int kDriverVersion = 13000;

// A distinct function with F's signature that calls F: what a driver's internal table may hold.
template <typename Signature, Signature* F>
struct Private;
template <typename R, typename... A, R (*F)(A...)>
struct Private<R(A...), F> {
  static R call(A... args) { return F(args...); }
};

struct ProcEntry {
  const char* base;
  int version;
  bool per_thread;
  void* exported;
  void* internal;
};

#define FAKE_PROC(base, version, per_thread, fn)                   \
  {                                                                \
    base, version, per_thread, reinterpret_cast<void*>(&fn),       \
        reinterpret_cast<void*>(&Private<decltype(fn), &fn>::call) \
  }

const ProcEntry kTable[] = {
    FAKE_PROC("cuInit", 2000, false, cuInit),
    FAKE_PROC("cuDriverGetVersion", 2020, false, cuDriverGetVersion),
    FAKE_PROC("cuGetProcAddress", 11030, false, cuGetProcAddress),
    FAKE_PROC("cuGetProcAddress", 12000, false, cuGetProcAddress_v2),
    FAKE_PROC("cuDeviceGet", 2000, false, cuDeviceGet),
    FAKE_PROC("cuDeviceGetCount", 2000, false, cuDeviceGetCount),
    FAKE_PROC("cuDeviceGetName", 2000, false, cuDeviceGetName),
    FAKE_PROC("cuDeviceGetUuid", 9020, false, cuDeviceGetUuid),
    FAKE_PROC("cuDeviceGetUuid", 11040, false, cuDeviceGetUuid_v2),
    FAKE_PROC("cuDeviceTotalMem", 2000, false, cuDeviceTotalMem),
    FAKE_PROC("cuDeviceTotalMem", 3020, false, cuDeviceTotalMem_v2),
    FAKE_PROC("cuDevicePrimaryCtxRetain", 7000, false, cuDevicePrimaryCtxRetain),
    FAKE_PROC("cuDevicePrimaryCtxRelease", 7000, false, cuDevicePrimaryCtxRelease),
    FAKE_PROC("cuDevicePrimaryCtxRelease", 11000, false, cuDevicePrimaryCtxRelease_v2),
    FAKE_PROC("cuDevicePrimaryCtxReset", 7000, false, cuDevicePrimaryCtxReset),
    FAKE_PROC("cuDevicePrimaryCtxReset", 11000, false, cuDevicePrimaryCtxReset_v2),
    FAKE_PROC("cuDevicePrimaryCtxGetState", 7000, false, cuDevicePrimaryCtxGetState),
    FAKE_PROC("cuCtxCreate", 3020, false, cuCtxCreate_v2),
    FAKE_PROC("cuCtxDestroy", 2000, false, cuCtxDestroy),
    FAKE_PROC("cuCtxDestroy", 4000, false, cuCtxDestroy_v2),
    FAKE_PROC("cuCtxSetCurrent", 4000, false, cuCtxSetCurrent),
    FAKE_PROC("cuCtxGetCurrent", 4000, false, cuCtxGetCurrent),
    FAKE_PROC("cuCtxGetDevice", 2000, false, cuCtxGetDevice),
    FAKE_PROC("cuMemGetInfo", 2000, false, cuMemGetInfo),
    FAKE_PROC("cuMemGetInfo", 3020, false, cuMemGetInfo_v2),
    FAKE_PROC("cuMemAlloc", 2000, false, cuMemAlloc),
    FAKE_PROC("cuMemAlloc", 3020, false, cuMemAlloc_v2),
    FAKE_PROC("cuMemAllocPitch", 3020, false, cuMemAllocPitch_v2),
    FAKE_PROC("cuMemAllocManaged", 6000, false, cuMemAllocManaged),
    FAKE_PROC("cuMemFree", 2000, false, cuMemFree),
    FAKE_PROC("cuMemFree", 3020, false, cuMemFree_v2),
    FAKE_PROC("cuMemGetAddressRange", 3020, false, cuMemGetAddressRange_v2),
    FAKE_PROC("cuMemGetAllocationGranularity", 10020, false, cuMemGetAllocationGranularity),
    FAKE_PROC("cuMemCreate", 10020, false, cuMemCreate),
    FAKE_PROC("cuMemRelease", 10020, false, cuMemRelease),
    FAKE_PROC("cuMemRetainAllocationHandle", 11000, false, cuMemRetainAllocationHandle),
    FAKE_PROC("cuMemAddressReserve", 10020, false, cuMemAddressReserve),
    FAKE_PROC("cuMemAddressFree", 10020, false, cuMemAddressFree),
    FAKE_PROC("cuMemMap", 10020, false, cuMemMap),
    FAKE_PROC("cuMemUnmap", 10020, false, cuMemUnmap),
    FAKE_PROC("cuMemSetAccess", 10020, false, cuMemSetAccess),
    FAKE_PROC("cuStreamCreate", 2000, false, cuStreamCreate),
    FAKE_PROC("cuStreamDestroy", 4000, false, cuStreamDestroy_v2),
    FAKE_PROC("cuStreamGetDevice", 12080, false, cuStreamGetDevice),
    FAKE_PROC("cuStreamGetDevice", 12080, true, cuStreamGetDevice_ptsz),
    FAKE_PROC("cuMemAllocAsync", 11020, false, cuMemAllocAsync),
    FAKE_PROC("cuMemAllocAsync", 11020, true, cuMemAllocAsync_ptsz),
    FAKE_PROC("cuMemAllocFromPoolAsync", 11020, false, cuMemAllocFromPoolAsync),
    FAKE_PROC("cuMemAllocFromPoolAsync", 11020, true, cuMemAllocFromPoolAsync_ptsz),
    FAKE_PROC("cuMemFreeAsync", 11020, false, cuMemFreeAsync),
    FAKE_PROC("cuMemFreeAsync", 11020, true, cuMemFreeAsync_ptsz),
    FAKE_PROC("cuMemPoolCreate", 11020, false, cuMemPoolCreate),
    FAKE_PROC("cuMemPoolDestroy", 11020, false, cuMemPoolDestroy),
    FAKE_PROC("cuDeviceGetDefaultMemPool", 11020, false, cuDeviceGetDefaultMemPool),
    FAKE_PROC("cuDeviceGetMemPool", 11020, false, cuDeviceGetMemPool),
    FAKE_PROC("cuMemGetDefaultMemPool", 13000, false, cuMemGetDefaultMemPool),
    FAKE_PROC("cuMemGetMemPool", 13000, false, cuMemGetMemPool),
};

const ProcEntry* best_variant(const char* symbol, int version, bool per_thread, bool* known) {
  const ProcEntry* best = nullptr;
  for (const ProcEntry& entry : kTable) {
    if (strcmp(entry.base, symbol) != 0) continue;
    *known = true;
    if (entry.per_thread != per_thread || entry.version > version) continue;
    if (best == nullptr || entry.version > best->version) best = &entry;
  }
  return best;
}

CUresult lookup(const char* symbol, void** pfn, int version, cuuint64_t flags,
                CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  if (version > kDriverVersion) return CUDA_ERROR_INVALID_VALUE;  // newer than this driver
  bool known = false;
  bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const ProcEntry* entry = best_variant(symbol, version, per_thread, &known);
  if (entry == nullptr && per_thread) entry = best_variant(symbol, version, false, &known);
  if (!known) {
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  if (entry == nullptr) {
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_SUCCESS;
  }
  const FakeGpuConfig& gpu = fake_gpu_config();
  if (gpu.newer_memalloc && version >= 13000 && strcmp(symbol, "cuMemAlloc") == 0) {
    *pfn = reinterpret_cast<void*>(&cuMemAlloc_v3);
  } else {
    *pfn = gpu.private_proc_table ? entry->internal : entry->exported;
  }
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

CUresult cuMemAlloc_v3(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  return cuMemAlloc_v2(dptr, bytes);
}

// The pre-_v2 variants, handed out for an older CUDA version (a CUDA 13 program on the H200 asked
// for cuDevicePrimaryCtxRelease/Reset at 7000). The fake gives them the _v2 behaviour.
CUresult cuDevicePrimaryCtxRelease(CUdevice device) {
  return cuDevicePrimaryCtxRelease_v2(device);
}

CUresult cuDevicePrimaryCtxReset(CUdevice device) {
  return cuDevicePrimaryCtxReset_v2(device);
}

CUresult cuCtxDestroy(CUcontext context) {
  return cuCtxDestroy_v2(context);
}

CUresult cuMemFree(CUdeviceptr_v1 ptr) {
  return cuMemFree_v2(CUdeviceptr(ptr));
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  return lookup(symbol, pfn, version, flags, status);
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return lookup(symbol, pfn, version, flags, nullptr);
}

}  // extern "C"
