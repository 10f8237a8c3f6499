// The fake CUDA driver's devices, contexts, streams, pools and memory (see fake_libcuda.h).
// Memory is real host memory (anonymous mappings, committed only when touched); a device's usage
// is charged against its fixed size like a GPU's. Linked with -Bsymbolic: calls between its own
// entry points never reach an interposer.
#include "fakes/fake_libcuda.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace {

struct FakeContext {
  int device;
  int retains;
  bool alive;
};

// Memory belongs to the process that allocated it: a fork child inherits the fake's tables but,
// as with a real driver, cannot free its parent's memory, and its exit does not free it.
struct Memory {
  uint64_t size;
  int device;  // -1: host memory
  FakeContext* context;
  void* backing;
  pid_t owner;
};

struct Physical {
  uint64_t size;
  int device;
  int references;
  int mappings;
  void* backing;
  pid_t owner;
};

struct Mapping {
  uint64_t size;
  Physical* physical;
};

struct FakeStream {
  int device;
};

struct FakePool {
  CUmemLocation location;
};

std::mutex g_lock;
bool g_initialized = false;
FakeContext g_primary[kFakeMaxDevices];
thread_local FakeContext* t_current = nullptr;
std::unordered_map<uint64_t, Memory> g_pointers;
std::unordered_map<uint64_t, Physical*> g_handles;
std::map<uint64_t, Mapping> g_mappings;
FakePool g_default_pools[kFakeMaxDevices];
FakePool g_host_pool{{CU_MEM_LOCATION_TYPE_HOST, 0}};
std::atomic<uint64_t> g_next_address{uint64_t(0x2000) << 32};

void uncharge(int device, uint64_t bytes);

// Like a GPU driver, gives back what this process still holds when it exits normally (a killed
// process's memory stays charged in FAKE_CUDA_SHARED_FILE). Defined after the tables, so it is
// destroyed before them.
struct ReleaseAtExit {
  ~ReleaseAtExit() {
    std::lock_guard<std::mutex> lock(g_lock);
    for (const auto& [ptr, memory] : g_pointers) {
      if (memory.owner == getpid()) uncharge(memory.device, memory.size);
    }
    for (const auto& [handle, physical] : g_handles) {
      if (physical->owner == getpid()) uncharge(physical->device, physical->size);
    }
    g_pointers.clear();
    g_handles.clear();
  }
} g_release_at_exit;

const FakeGpuConfig& gpu() {
  return fake_gpu_config();
}

bool valid_device(int device) {
  return device >= 0 && device < gpu().devices;
}

CUresult current_context(FakeContext** context) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (t_current == nullptr || !t_current->alive) return CUDA_ERROR_INVALID_CONTEXT;
  *context = t_current;
  return CUDA_SUCCESS;
}

// Takes `bytes` of device memory, as the GPU would: out of memory past its size.
CUresult charge(int device, uint64_t bytes) {
  if (gpu().alloc_delay_us > 0) usleep(useconds_t(gpu().alloc_delay_us));
  uint64_t capacity =
      gpu().total_bytes > gpu().others_bytes ? gpu().total_bytes - gpu().others_bytes : 0;
  std::atomic<uint64_t>& used = gpu().usage->used[device];
  uint64_t now = used.load();
  do {
    if (now + bytes > capacity) return CUDA_ERROR_OUT_OF_MEMORY;
  } while (!used.compare_exchange_weak(now, now + bytes));
  std::atomic<uint64_t>& peak = gpu().usage->peak[device];
  uint64_t high = peak.load();
  while (now + bytes > high && !peak.compare_exchange_weak(high, now + bytes)) {
  }
  return CUDA_SUCCESS;
}

void uncharge(int device, uint64_t bytes) {
  if (device >= 0) gpu().usage->used[device].fetch_sub(bytes);
}

void* map_backing(uint64_t size, bool low_32_bits) {
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (low_32_bits ? MAP_32BIT : 0);
  void* memory = mmap(nullptr, size, PROT_READ | PROT_WRITE, flags, -1, 0);
  return memory == MAP_FAILED ? nullptr : memory;
}

CUresult allocate(CUdeviceptr* dptr, uint64_t size, int device, FakeContext* context,
                  bool low_32_bits = false) {
  if (dptr == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (device >= 0) {
    if (CUresult result = charge(device, size); result != CUDA_SUCCESS) return result;
  }
  void* backing = map_backing(size, low_32_bits);
  if (backing == nullptr) {
    uncharge(device, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *dptr = CUdeviceptr(uintptr_t(backing));
  std::lock_guard<std::mutex> lock(g_lock);
  g_pointers[*dptr] = Memory{size, device, context, backing, getpid()};
  return CUDA_SUCCESS;
}

CUresult release_pointer(CUdeviceptr ptr) {
  Memory memory;
  {
    std::lock_guard<std::mutex> lock(g_lock);
    auto found = g_pointers.find(ptr);
    if (found == g_pointers.end() || found->second.owner != getpid()) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    memory = found->second;
    g_pointers.erase(found);
  }
  munmap(memory.backing, memory.size);
  uncharge(memory.device, memory.size);
  return CUDA_SUCCESS;
}

// A context's memory goes away with it.
void free_context_memory(FakeContext* context) {
  std::vector<CUdeviceptr> gone;
  {
    std::lock_guard<std::mutex> lock(g_lock);
    for (const auto& [ptr, memory] : g_pointers) {
      if (memory.context == context) gone.push_back(ptr);
    }
  }
  for (CUdeviceptr ptr : gone) release_pointer(ptr);
}

void free_physical_if_unused(Physical* physical) {
  if (physical->references > 0 || physical->mappings > 0) return;
  g_handles.erase(uint64_t(uintptr_t(physical)));
  munmap(physical->backing, physical->size);
  uncharge(physical->device, physical->size);
  delete physical;
}

int stream_device_of(CUstream stream) {
  uintptr_t handle = uintptr_t(stream);
  if (handle <= 2) return t_current != nullptr ? t_current->device : -1;  // 0, legacy, per-thread
  return reinterpret_cast<FakeStream*>(stream)->device;
}

CUresult allocate_from_pool(CUdeviceptr* dptr, size_t size, CUmemoryPool pool, CUstream stream) {
  FakeContext* context = nullptr;
  if (CUresult result = current_context(&context); result != CUDA_SUCCESS) return result;
  auto* fake_pool = reinterpret_cast<FakePool*>(pool);
  int device =
      fake_pool->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? fake_pool->location.id : -1;
  (void)stream;
  return allocate(dptr, size, device, context);
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_lock);
  if (!g_initialized) {
    for (int d = 0; d < kFakeMaxDevices; ++d) {
      g_primary[d] = FakeContext{d, 0, false};
      g_default_pools[d] = FakePool{{CU_MEM_LOCATION_TYPE_DEVICE, d}};
    }
    g_initialized = true;
  }
  return CUDA_SUCCESS;
}

int fake_cuda_initialized(void) {
  return g_initialized ? 1 : 0;
}

CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = 13000;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  *count = gpu().devices;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!valid_device(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(name, size_t(length), "Fake GPU %d", device);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice device) {
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  *uuid = fake_device_uuid(device);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice device) {
  return cuDeviceGetUuid(uuid, device);
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = gpu().total_bytes;
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice device) {
  size_t total = 0;
  CUresult result = cuDeviceTotalMem_v2(&total, device);
  if (result == CUDA_SUCCESS) *bytes = total > 0xffffffffu ? 0xffffffffu : unsigned(total);
  return result;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(g_lock);
  ++g_primary[device].retains;
  g_primary[device].alive = true;
  *context = reinterpret_cast<CUcontext>(&g_primary[device]);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  bool destroyed = false;
  {
    std::lock_guard<std::mutex> lock(g_lock);
    if (g_primary[device].retains == 0) return CUDA_ERROR_INVALID_CONTEXT;
    destroyed = --g_primary[device].retains == 0;
  }
  if (destroyed) {
    free_context_memory(&g_primary[device]);
    g_primary[device].alive = false;
  }
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice device) {
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  free_context_memory(&g_primary[device]);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice device, unsigned int* flags, int* active) {
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  *flags = 0;
  *active = g_primary[device].retains > 0 ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult cuCtxCreate_v2(CUcontext* context, unsigned int flags, CUdevice device) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  auto* created = new FakeContext{device, 1, true};
  t_current = created;
  *context = reinterpret_cast<CUcontext>(created);
  return CUDA_SUCCESS;
}

CUresult cuCtxDestroy_v2(CUcontext context) {
  auto* fake = reinterpret_cast<FakeContext*>(context);
  if (fake == nullptr || !fake->alive) return CUDA_ERROR_INVALID_CONTEXT;
  free_context_memory(fake);
  fake->alive = false;  // kept: a stale handle must stay detectable
  if (t_current == fake) t_current = nullptr;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext context) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  t_current = reinterpret_cast<FakeContext*>(context);
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* context) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  *context = reinterpret_cast<CUcontext>(t_current);
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice* device) {
  FakeContext* context = nullptr;
  if (CUresult result = current_context(&context); result != CUDA_SUCCESS) return result;
  *device = context->device;
  return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  FakeContext* context = nullptr;
  if (CUresult result = current_context(&context); result != CUDA_SUCCESS) return result;
  uint64_t taken = gpu().usage->used[context->device].load() + gpu().others_bytes;
  *total_bytes = gpu().total_bytes;
  *free_bytes = taken < gpu().total_bytes ? gpu().total_bytes - taken : 0;
  return CUDA_SUCCESS;
}

CUresult cuMemGetInfo(unsigned int* free_bytes, unsigned int* total_bytes) {
  size_t free = 0, total = 0;
  CUresult result = cuMemGetInfo_v2(&free, &total);
  if (result != CUDA_SUCCESS) return result;
  *free_bytes = free > 0xffffffffu ? 0xffffffffu : unsigned(free);
  *total_bytes = total > 0xffffffffu ? 0xffffffffu : unsigned(total);
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  FakeContext* context = nullptr;
  if (CUresult result = current_context(&context); result != CUDA_SUCCESS) return result;
  return allocate(dptr, bytes, context->device, context);
}

CUresult cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytes) {
  FakeContext* context = nullptr;
  if (CUresult result = current_context(&context); result != CUDA_SUCCESS) return result;
  CUdeviceptr wide = 0;
  CUresult result = allocate(&wide, bytes, context->device, context, /*low_32_bits=*/true);
  if (result == CUDA_SUCCESS) *dptr = CUdeviceptr_v1(wide);
  return result;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                            unsigned int element_bytes) {
  FakeContext* context = nullptr;
  if (CUresult result = current_context(&context); result != CUDA_SUCCESS) return result;
  if (pitch == nullptr || width == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
  *pitch = (width + 511) / 512 * 512;
  return allocate(dptr, uint64_t(*pitch) * height, context->device, context);
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  FakeContext* context = nullptr;
  if (CUresult result = current_context(&context); result != CUDA_SUCCESS) return result;
  return allocate(dptr, bytes, context->device, context);
}

CUresult cuMemFree_v2(CUdeviceptr ptr) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  return release_pointer(ptr);
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) {
  std::lock_guard<std::mutex> lock(g_lock);
  auto found = g_pointers.find(ptr);
  if (found == g_pointers.end()) return CUDA_ERROR_NOT_FOUND;
  if (base != nullptr) *base = ptr;
  if (size != nullptr) *size = found->second.size;
  return CUDA_SUCCESS;
}

// --- virtual memory management ---

CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags option) {
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *granularity = kFakeGranularity;
  return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long flags) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (handle == nullptr || prop == nullptr || size == 0 || size % kFakeGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  int device = -1;
  if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    if (!valid_device(prop->location.id)) return CUDA_ERROR_INVALID_DEVICE;
    device = prop->location.id;
  } else if (prop->location.type != CU_MEM_LOCATION_TYPE_HOST) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (device >= 0) {
    if (CUresult result = charge(device, size); result != CUDA_SUCCESS) return result;
  }
  void* backing = map_backing(size, false);
  if (backing == nullptr) {
    uncharge(device, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  auto* physical = new Physical{size, device, 1, 0, backing, getpid()};
  *handle = uint64_t(uintptr_t(physical));
  std::lock_guard<std::mutex> lock(g_lock);
  g_handles[*handle] = physical;
  return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  std::lock_guard<std::mutex> lock(g_lock);
  auto found = g_handles.find(handle);
  if (found == g_handles.end() || found->second->references == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  --found->second->references;
  free_physical_if_unused(found->second);
  return CUDA_SUCCESS;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* address) {
  std::lock_guard<std::mutex> lock(g_lock);
  uint64_t target = uint64_t(uintptr_t(address));
  auto at = g_mappings.upper_bound(target);
  if (at == g_mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
  --at;
  if (target >= at->first + at->second.size) return CUDA_ERROR_INVALID_VALUE;
  ++at->second.physical->references;
  *handle = uint64_t(uintptr_t(at->second.physical));
  return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
  if (ptr == nullptr || size == 0 || size % kFakeGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
  *ptr = g_next_address.fetch_add(size + kFakeGranularity);  // address space only: no memory
  return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  std::lock_guard<std::mutex> lock(g_lock);
  auto found = g_handles.find(handle);
  if (found == g_handles.end() || offset != 0 || size == 0 || size > found->second->size ||
      ptr % kFakeGranularity != 0 || g_mappings.count(ptr) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  ++found->second->mappings;
  g_mappings[ptr] = Mapping{size, found->second};
  return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  std::lock_guard<std::mutex> lock(g_lock);
  auto first = g_mappings.lower_bound(ptr);
  auto last = first;
  while (last != g_mappings.end() && last->first + last->second.size <= ptr + size) ++last;
  if (first == last) return CUDA_ERROR_INVALID_VALUE;
  std::vector<Physical*> unmapped;
  for (auto it = first; it != last; ++it) unmapped.push_back(it->second.physical);
  g_mappings.erase(first, last);
  for (Physical* physical : unmapped) {
    --physical->mappings;
    free_physical_if_unused(physical);
  }
  return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  return desc != nullptr && count > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// --- streams and stream-ordered allocation ---

CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
  FakeContext* context = nullptr;
  if (CUresult result = current_context(&context); result != CUDA_SUCCESS) return result;
  *stream = reinterpret_cast<CUstream>(new FakeStream{context->device});
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream stream) {
  if (uintptr_t(stream) <= 2) return CUDA_ERROR_INVALID_VALUE;
  delete reinterpret_cast<FakeStream*>(stream);
  return CUDA_SUCCESS;
}

CUresult cuStreamGetDevice(CUstream stream, CUdevice* device) {
  FakeContext* context = nullptr;
  if (CUresult result = current_context(&context); result != CUDA_SUCCESS) return result;
  *device = stream_device_of(stream);
  return CUDA_SUCCESS;
}

CUresult cuStreamGetDevice_ptsz(CUstream stream, CUdevice* device) {
  return cuStreamGetDevice(stream, device);
}

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  FakeContext* context = nullptr;
  if (CUresult result = current_context(&context); result != CUDA_SUCCESS) return result;
  return allocate_from_pool(
      dptr, bytes, reinterpret_cast<CUmemoryPool>(&g_default_pools[stream_device_of(stream)]),
      stream);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  return cuMemAllocAsync(dptr, bytes, stream);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                 CUstream stream) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return allocate_from_pool(dptr, bytes, pool, stream);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                      CUstream stream) {
  return cuMemAllocFromPoolAsync(dptr, bytes, pool, stream);
}

CUresult cuMemFreeAsync(CUdeviceptr ptr, CUstream stream) {
  return release_pointer(ptr);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr ptr, CUstream stream) {
  return release_pointer(ptr);
}

CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (pool == nullptr || props == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pool = reinterpret_cast<CUmemoryPool>(new FakePool{props->location});
  return CUDA_SUCCESS;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  delete reinterpret_cast<FakePool*>(pool);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice device) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  *pool = reinterpret_cast<CUmemoryPool>(&g_default_pools[device]);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice device) {
  return cuDeviceGetDefaultMemPool(pool, device);
}

CUresult cuMemGetDefaultMemPool(CUmemoryPool* pool, CUmemLocation* location,
                                CUmemAllocationType type) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (location == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (location->type == CU_MEM_LOCATION_TYPE_DEVICE) {
    return cuDeviceGetDefaultMemPool(pool, location->id);
  }
  if (location->type != CU_MEM_LOCATION_TYPE_HOST) return CUDA_ERROR_INVALID_VALUE;
  *pool = reinterpret_cast<CUmemoryPool>(&g_host_pool);
  return CUDA_SUCCESS;
}

CUresult cuMemGetMemPool(CUmemoryPool* pool, CUmemLocation* location, CUmemAllocationType type) {
  return cuMemGetDefaultMemPool(pool, location, type);
}

}  // extern "C"
