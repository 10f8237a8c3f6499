// Interposed allocations that return a device pointer: cuMemAlloc, cuMemAllocPitch,
// cuMemAllocManaged, stream-ordered (pool) allocations and their frees; memory pools (to know
// which device a pool allocates on); and context teardown, which frees a context's allocations
// without a cuMemFree per pointer. Every variant a driver hands out is hooked, the older ones
// too: a CUDA 13 program asks cuGetProcAddress for cuDevicePrimaryCtxRelease/Reset at 7000.
//
// Each allocation reserves its bytes in the tenant ledger before the driver is called, and gives
// them back if the driver fails; each free takes its record out of the table before the driver is
// called (so an address the driver hands out again at once is never confused with it) and puts
// it back if the driver fails.
#include <stdint.h>
#include <stdlib.h>

#include <atomic>

#include "memcap/hook_table.h"
#include "memcap/shim.h"

using namespace gpufrac::memcap;

namespace {

constexpr int kPoolOnHost = -1;          // pinned host memory: not counted
constexpr int kPoolOnStreamDevice = -2;  // no fixed location: counted on the stream's device
constexpr uint64_t kPitchAlignmentGuess = 512;

constinit std::atomic<uint64_t> g_primary_context[kMaxDevices] = {};

uint64_t saturating_multiply(uint64_t a, uint64_t b) {
  uint64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? UINT64_MAX : product;
}

void record_pointer(CUdeviceptr ptr, int device, uint64_t bytes) {
  uint64_t context = current_context();
  AllocationRecord stale = {};
  {
    TableLock locked(pointer_table());
    bool existed = false;
    AllocationRecord* record = insert_record(locked, ptr, &existed);
    if (record == nullptr) return;
    if (existed) stale = *record;  // its memory went away unseen (a context was torn down)
    record->bytes = bytes;
    record->device = device;
    record->link = context;
  }
  if (stale.used) release_bytes(stale.device, stale.bytes);
}

template <typename Allocate>
CUresult allocate_counted(int device, uint64_t bytes, CUdeviceptr* dptr, Allocate allocate) {
  if (CUresult refused = ensure_ready(); refused != CUDA_SUCCESS) return refused;
  if (!device_capped(device) || dptr == nullptr) return allocate();
  if (!reserve_bytes(device, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult result = allocate();
  if (result != CUDA_SUCCESS) {
    release_bytes(device, bytes);
    return result;
  }
  record_pointer(*dptr, device, bytes);
  return result;
}

template <typename Free>
CUresult free_counted(CUdeviceptr ptr, Free free_memory) {
  AllocationRecord taken = {};
  {
    TableLock locked(pointer_table());
    if (AllocationRecord* record = locked.table().find(ptr); record != nullptr) {
      taken = *record;
      locked.table().erase(ptr);
    }
  }
  CUresult result = free_memory();
  if (!taken.used) return result;
  if (result == CUDA_SUCCESS) {
    release_bytes(taken.device, taken.bytes);
  } else {
    TableLock locked(pointer_table());
    bool existed = false;
    if (AllocationRecord* record = insert_record(locked, ptr, &existed); record != nullptr) {
      *record = taken;
    }
  }
  return result;
}

void record_pool(CUmemoryPool pool, const CUmemLocation* location) {
  if (!cap_requested() || pool == nullptr || location == nullptr) return;
  int device = kPoolOnStreamDevice;
  if (location->type == CU_MEM_LOCATION_TYPE_DEVICE) {
    device = location->id;
  } else if (location->type == CU_MEM_LOCATION_TYPE_HOST ||
             location->type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
             location->type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT) {
    device = kPoolOnHost;
  }
  TableLock locked(pool_table());
  bool existed = false;
  if (AllocationRecord* record = insert_record(locked, uint64_t(uintptr_t(pool)), &existed)) {
    record->device = device;
  }
}

int pool_device(CUmemoryPool pool, CUstream stream) {
  int device = kPoolOnStreamDevice;
  {
    TableLock locked(pool_table());
    if (AllocationRecord* record = locked.table().find(uint64_t(uintptr_t(pool)))) {
      device = record->device;
    }
  }
  if (device == kPoolOnHost) return -1;
  return device == kPoolOnStreamDevice ? stream_device(stream) : device;
}

// Releases every pointer that belonged to `context` (or, when the context is unknown, every
// pointer counted on `device`): their memory went away with the context.
void forget_context_pointers(uint64_t context, int device) {
  uint64_t freed[kMaxDevices] = {};
  {
    TableLock locked(pointer_table());
    size_t count = 0;
    auto* keys = static_cast<uint64_t*>(malloc((locked.table().size() + 1) * sizeof(uint64_t)));
    if (keys == nullptr) return;  // keeps counting them: too strict, never too lax
    locked.table().for_each([&](const AllocationRecord& record) {
      if (context != 0 ? record.link == context : record.device == device) {
        keys[count++] = record.key;
        freed[record.device] += record.bytes;
      }
    });
    for (size_t i = 0; i < count; ++i) locked.table().erase(keys[i]);
    free(keys);
  }
  for (int d = 0; d < kMaxDevices; ++d) release_bytes(d, freed[d]);
}

// cuDevicePrimaryCtxReset/Release in either variant (the same signature and, for the cap, the
// same meaning; _v2 came with CUDA 11.0).
using PrimaryContextCall = CUresult (*)(CUdevice);

CUresult reset_primary_context(PrimaryContextCall real, CUdevice device) {
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult result = real(device);
  if (result == CUDA_SUCCESS && device_capped(device)) {
    forget_context_pointers(g_primary_context[device].load(), device);
  }
  return result;
}

CUresult release_primary_context(PrimaryContextCall real, CUdevice device) {
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult result = real(device);
  auto get_state = REAL(cuDevicePrimaryCtxGetState);
  unsigned int flags = 0;
  int active = 1;
  if (result == CUDA_SUCCESS && device_capped(device) && get_state != nullptr &&
      get_state(device, &flags, &active) == CUDA_SUCCESS && active == 0) {
    forget_context_pointers(g_primary_context[device].load(), device);  // the last release
  }
  return result;
}

CUresult destroy_context(decltype(&cuCtxDestroy_v2) real, CUcontext context) {
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult result = real(context);
  if (result == CUDA_SUCCESS && cap_requested() && context != nullptr) {
    forget_context_pointers(uint64_t(uintptr_t(context)), -1);
  }
  return result;
}

CUresult refuse_32bit(const char* name) {
  static constinit std::atomic<bool> said{false};
  if (!said.exchange(true)) {
    say("%s (the 32-bit variant) is refused on a capped device; use its _v2", name);
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

}  // namespace

extern "C" {

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  auto real = REAL(cuMemAlloc_v2);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (!cap_requested()) return real(dptr, bytes);
  return allocate_counted(current_device(), bytes, dptr, [&] { return real(dptr, bytes); });
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  auto real = REAL(cuMemAllocManaged);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (!cap_requested()) return real(dptr, bytes, flags);
  // Counted on the current device whether or not the pages ever migrate there.
  return allocate_counted(current_device(), bytes, dptr, [&] { return real(dptr, bytes, flags); });
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                            unsigned int element_bytes) {
  auto real = REAL(cuMemAllocPitch_v2);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (!cap_requested()) return real(dptr, pitch, width, height, element_bytes);
  if (CUresult refused = ensure_ready(); refused != CUDA_SUCCESS) return refused;
  int device = current_device();
  if (!device_capped(device) || dptr == nullptr || pitch == nullptr) {
    return real(dptr, pitch, width, height, element_bytes);
  }
  // The pitch is known only afterwards: reserve a likely upper bound, then settle the difference.
  uint64_t padded_width =
      (uint64_t(width) + kPitchAlignmentGuess - 1) & ~(kPitchAlignmentGuess - 1);
  uint64_t estimate = saturating_multiply(padded_width, height);
  if (!reserve_bytes(device, estimate)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult result = real(dptr, pitch, width, height, element_bytes);
  if (result != CUDA_SUCCESS) {
    release_bytes(device, estimate);
    return result;
  }
  uint64_t actual = saturating_multiply(*pitch, height);
  if (actual > estimate && !reserve_bytes(device, actual - estimate)) {
    REAL(cuMemFree_v2)(*dptr);
    release_bytes(device, estimate);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (actual < estimate) release_bytes(device, estimate - actual);
  record_pointer(*dptr, device, actual);
  return result;
}

CUresult cuMemFree_v2(CUdeviceptr ptr) {
  auto real = REAL(cuMemFree_v2);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (!cap_requested()) return real(ptr);
  return free_counted(ptr, [&] { return real(ptr); });
}

// The 32-bit free. Its pointer comes from cuMemAlloc (refused on a capped device) or is a
// counted one that lies below 4 GiB, released then as cuMemFree_v2 releases it.
CUresult cuMemFree(CUdeviceptr_v1 ptr) {
  auto real = REAL(cuMemFree);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (!cap_requested()) return real(ptr);
  return free_counted(CUdeviceptr(ptr), [&] { return real(ptr); });
}

CUresult cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytes) {
  auto real = REAL(cuMemAlloc);
  if (cap_requested()) {
    if (CUresult refused = ensure_ready(); refused != CUDA_SUCCESS) return refused;
    if (device_capped(current_device())) return refuse_32bit("cuMemAlloc");
  }
  return real != nullptr ? real(dptr, bytes) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuMemAllocPitch(CUdeviceptr_v1* dptr, unsigned int* pitch, unsigned int width,
                         unsigned int height, unsigned int element_bytes) {
  auto real = REAL(cuMemAllocPitch);
  if (cap_requested()) {
    if (CUresult refused = ensure_ready(); refused != CUDA_SUCCESS) return refused;
    if (device_capped(current_device())) return refuse_32bit("cuMemAllocPitch");
  }
  return real != nullptr ? real(dptr, pitch, width, height, element_bytes)
                         : CUDA_ERROR_NOT_SUPPORTED;
}

// --- stream-ordered allocation ---

#define GPUFRAC_MEMCAP_ALLOC_ASYNC(name)                                \
  CUresult name(CUdeviceptr* dptr, size_t bytes, CUstream stream) {     \
    auto real = REAL(name);                                             \
    if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;             \
    if (!cap_requested()) return real(dptr, bytes, stream);             \
    return allocate_counted(stream_device(stream), bytes, dptr,         \
                            [&] { return real(dptr, bytes, stream); }); \
  }
GPUFRAC_MEMCAP_ALLOC_ASYNC(cuMemAllocAsync)
GPUFRAC_MEMCAP_ALLOC_ASYNC(cuMemAllocAsync_ptsz)
#undef GPUFRAC_MEMCAP_ALLOC_ASYNC

#define GPUFRAC_MEMCAP_ALLOC_FROM_POOL(name)                                           \
  CUresult name(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream stream) { \
    auto real = REAL(name);                                                            \
    if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;                            \
    if (!cap_requested()) return real(dptr, bytes, pool, stream);                      \
    return allocate_counted(pool_device(pool, stream), bytes, dptr,                    \
                            [&] { return real(dptr, bytes, pool, stream); });          \
  }
GPUFRAC_MEMCAP_ALLOC_FROM_POOL(cuMemAllocFromPoolAsync)
GPUFRAC_MEMCAP_ALLOC_FROM_POOL(cuMemAllocFromPoolAsync_ptsz)
#undef GPUFRAC_MEMCAP_ALLOC_FROM_POOL

#define GPUFRAC_MEMCAP_FREE_ASYNC(name)                                                   \
  CUresult name(CUdeviceptr ptr, CUstream stream) {                                       \
    auto real = REAL(name);                                                               \
    if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;                               \
    if (!cap_requested()) return real(ptr, stream);                                       \
    /* The bytes come back when the free is enqueued: later stream-ordered allocations */ \
    /* may reuse them at once, so the cap must let them. */                               \
    return free_counted(ptr, [&] { return real(ptr, stream); });                          \
  }
GPUFRAC_MEMCAP_FREE_ASYNC(cuMemFreeAsync)
GPUFRAC_MEMCAP_FREE_ASYNC(cuMemFreeAsync_ptsz)
#undef GPUFRAC_MEMCAP_FREE_ASYNC

// --- where pools live ---

CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  auto real = REAL(cuMemPoolCreate);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult result = real(pool, props);
  if (result == CUDA_SUCCESS && pool != nullptr && props != nullptr) {
    record_pool(*pool, &props->location);
  }
  return result;
}

#define GPUFRAC_MEMCAP_DEVICE_POOL(name)                              \
  CUresult name(CUmemoryPool* pool, CUdevice device) {                \
    auto real = REAL(name);                                           \
    if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;           \
    CUresult result = real(pool, device);                             \
    if (result == CUDA_SUCCESS && pool != nullptr) {                  \
      CUmemLocation location = {CU_MEM_LOCATION_TYPE_DEVICE, device}; \
      record_pool(*pool, &location);                                  \
    }                                                                 \
    return result;                                                    \
  }
GPUFRAC_MEMCAP_DEVICE_POOL(cuDeviceGetDefaultMemPool)
GPUFRAC_MEMCAP_DEVICE_POOL(cuDeviceGetMemPool)
#undef GPUFRAC_MEMCAP_DEVICE_POOL

#define GPUFRAC_MEMCAP_LOCATION_POOL(name)                                               \
  CUresult name(CUmemoryPool* pool, CUmemLocation* location, CUmemAllocationType type) { \
    auto real = REAL(name);                                                              \
    if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;                              \
    CUresult result = real(pool, location, type);                                        \
    if (result == CUDA_SUCCESS && pool != nullptr) record_pool(*pool, location);         \
    return result;                                                                       \
  }
GPUFRAC_MEMCAP_LOCATION_POOL(cuMemGetDefaultMemPool)
GPUFRAC_MEMCAP_LOCATION_POOL(cuMemGetMemPool)
#undef GPUFRAC_MEMCAP_LOCATION_POOL

// --- context teardown ---

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  auto real = REAL(cuDevicePrimaryCtxRetain);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult result = real(context, device);
  if (result == CUDA_SUCCESS && context != nullptr && device >= 0 && device < kMaxDevices) {
    g_primary_context[device].store(uint64_t(uintptr_t(*context)));
  }
  return result;
}

CUresult cuDevicePrimaryCtxReset(CUdevice device) {
  return reset_primary_context(REAL(cuDevicePrimaryCtxReset), device);
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice device) {
  return reset_primary_context(REAL(cuDevicePrimaryCtxReset_v2), device);
}

CUresult cuDevicePrimaryCtxRelease(CUdevice device) {
  return release_primary_context(REAL(cuDevicePrimaryCtxRelease), device);
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  return release_primary_context(REAL(cuDevicePrimaryCtxRelease_v2), device);
}

CUresult cuCtxDestroy(CUcontext context) {
  return destroy_context(REAL(cuCtxDestroy), context);
}

CUresult cuCtxDestroy_v2(CUcontext context) {
  return destroy_context(REAL(cuCtxDestroy_v2), context);
}

}  // extern "C"
