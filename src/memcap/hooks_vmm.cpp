// Interposed virtual memory management (what PyTorch's expandable segments use): cuMemCreate
// makes physical memory, which the driver frees only once every handle reference is released AND
// every mapping of it is unmapped. The bytes are counted from cuMemCreate until that moment, so
// the common pattern "create, map, release the handle, use, unmap" cannot slip past the cap.
//
// Handle records count references (cuMemCreate: 1, cuMemRetainAllocationHandle: +1,
// cuMemRelease: -1) and live mappings; mapping records (by address) name the handle mapped there,
// with the handle's serial number so that a handle value the driver reuses is never confused with
// the old one.
#include <stdint.h>
#include <stdlib.h>

#include <atomic>

#include "memcap/hook_table.h"
#include "memcap/shim.h"

using namespace gpufrac::memcap;

namespace {

// Mappings of device memory start at multiples of the allocation granularity, 2 MiB or more.
constexpr uint64_t kMinimumGranularity = uint64_t(2) << 20;

constinit std::atomic<uint64_t> g_next_serial{1};

struct TakenMappings {
  AllocationRecord* records = nullptr;
  size_t count = 0;
  size_t capacity = 0;
  ~TakenMappings() { free(records); }
  bool push(const AllocationRecord& record) {
    if (count == capacity) {
      size_t grown = capacity == 0 ? 16 : capacity * 2;
      auto* bigger = static_cast<AllocationRecord*>(realloc(records, grown * sizeof *records));
      if (bigger == nullptr) return false;
      records = bigger;
      capacity = grown;
    }
    records[count++] = record;
    return true;
  }
};

// One mapping of `handle` (serial `tag`) is gone; releases the bytes if it was the last trace.
void mapping_gone(uint64_t handle, uint64_t tag) {
  AllocationRecord freed = {};
  {
    TableLock locked(handle_table());
    AllocationRecord* record = locked.table().find(handle);
    if (record == nullptr || record->tag != tag || record->mappings == 0) return;
    if (--record->mappings == 0 && record->references == 0) {
      freed = *record;
      locked.table().erase(handle);
    }
  }
  if (freed.used) release_bytes(freed.device, freed.bytes);
}

}  // namespace

extern "C" {

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long flags) {
  auto real = REAL(cuMemCreate);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (!cap_requested()) return real(handle, size, prop, flags);
  if (CUresult refused = ensure_ready(); refused != CUDA_SUCCESS) return refused;
  int device = (prop != nullptr && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
                   ? prop->location.id
                   : -1;  // host memory is not counted
  if (!device_capped(device) || handle == nullptr) return real(handle, size, prop, flags);
  if (!reserve_bytes(device, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult result = real(handle, size, prop, flags);
  if (result != CUDA_SUCCESS) {
    release_bytes(device, size);
    return result;
  }
  AllocationRecord stale = {};
  {
    TableLock locked(handle_table());
    bool existed = false;
    AllocationRecord* record = insert_record(locked, *handle, &existed);
    if (record == nullptr) return result;
    if (existed) stale = *record;  // a reused handle value: the old memory is gone
    record->bytes = size;
    record->device = device;
    record->references = 1;
    record->mappings = 0;
    record->tag = g_next_serial.fetch_add(1);
  }
  if (stale.used) release_bytes(stale.device, stale.bytes);
  return result;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* address) {
  auto real = REAL(cuMemRetainAllocationHandle);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult result = real(handle, address);
  if (result == CUDA_SUCCESS && cap_requested() && handle != nullptr) {
    TableLock locked(handle_table());
    if (AllocationRecord* record = locked.table().find(*handle)) ++record->references;
  }
  return result;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  auto real = REAL(cuMemRelease);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (!cap_requested()) return real(handle);
  AllocationRecord before = {};
  bool gone = false;
  {
    TableLock locked(handle_table());
    if (AllocationRecord* record = locked.table().find(handle);
        record != nullptr && record->references > 0) {
      before = *record;
      --record->references;
      gone = record->references == 0 && record->mappings == 0;
      if (gone) locked.table().erase(handle);
    }
  }
  CUresult result = real(handle);
  if (!before.used) return result;
  if (result == CUDA_SUCCESS) {
    if (gone) release_bytes(before.device, before.bytes);
    return result;
  }
  TableLock locked(handle_table());  // the driver kept the reference: undo
  bool existed = false;
  if (AllocationRecord* record = insert_record(locked, handle, &existed)) {
    if (existed) {
      ++record->references;
    } else {
      *record = before;
    }
  }
  return result;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  auto real = REAL(cuMemMap);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult result = real(ptr, size, offset, handle, flags);
  if (result != CUDA_SUCCESS || !cap_requested()) return result;
  uint64_t tag = 0;
  {
    TableLock locked(handle_table());
    AllocationRecord* record = locked.table().find(handle);
    if (record == nullptr) return result;  // not counted (host memory, imported, uncapped)
    ++record->mappings;
    tag = record->tag;
  }
  TableLock locked(mapping_table());
  bool existed = false;
  if (AllocationRecord* mapping = insert_record(locked, ptr, &existed)) {
    mapping->bytes = size;
    mapping->link = handle;
    mapping->tag = tag;
  }
  return result;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  auto real = REAL(cuMemUnmap);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (!cap_requested()) return real(ptr, size);
  // Take out the mappings lying wholly inside the range: what a successful unmap removes.
  TakenMappings taken;
  {
    TableLock locked(mapping_table());
    const uint64_t end = uint64_t(ptr) + size;
    uint64_t address = ptr;
    while (address < end) {
      AllocationRecord* mapping = locked.table().find(address);
      if (mapping == nullptr || mapping->bytes == 0 || address + mapping->bytes > end ||
          !taken.push(*mapping)) {
        address += kMinimumGranularity;
        continue;
      }
      address += mapping->bytes;
      locked.table().erase(taken.records[taken.count - 1].key);
    }
  }
  CUresult result = real(ptr, size);
  if (result != CUDA_SUCCESS) {
    TableLock locked(mapping_table());
    for (size_t i = 0; i < taken.count; ++i) {
      bool existed = false;
      if (AllocationRecord* mapping = insert_record(locked, taken.records[i].key, &existed)) {
        *mapping = taken.records[i];
      }
    }
    return result;
  }
  for (size_t i = 0; i < taken.count; ++i) {
    mapping_gone(taken.records[i].link, taken.records[i].tag);
  }
  return result;
}

}  // extern "C"
