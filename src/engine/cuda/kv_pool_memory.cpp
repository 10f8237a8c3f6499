#include "engine/cuda/kv_pool_memory.h"

#include <algorithm>
#include <string>
#include <utility>

#include "common/error.h"
#include "common/strings.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device_buffer.h"
#include "engine/model/kv_chunks.h"

namespace gpufrac::engine {

namespace {

// The driver's virtual memory management calls, found once through the runtime.
struct DriverVmm {
  decltype(&cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&cuMemAddressReserve) reserve = nullptr;
  decltype(&cuMemAddressFree) address_free = nullptr;
  decltype(&cuMemCreate) create = nullptr;
  decltype(&cuMemRelease) release = nullptr;
  decltype(&cuMemMap) map = nullptr;
  decltype(&cuMemUnmap) unmap = nullptr;
  decltype(&cuMemSetAccess) set_access = nullptr;
};

template <typename F>
void find_entry_point(const char* name, F& fn) {
  fn = reinterpret_cast<F>(driver_entry_point(name, "elastic KV"));
}

const DriverVmm& driver_vmm() {
  static const DriverVmm vmm = [] {
    DriverVmm v;
    find_entry_point("cuMemGetAllocationGranularity", v.granularity);
    find_entry_point("cuMemAddressReserve", v.reserve);
    find_entry_point("cuMemAddressFree", v.address_free);
    find_entry_point("cuMemCreate", v.create);
    find_entry_point("cuMemRelease", v.release);
    find_entry_point("cuMemMap", v.map);
    find_entry_point("cuMemUnmap", v.unmap);
    find_entry_point("cuMemSetAccess", v.set_access);
    return v;
  }();
  return vmm;
}

void check_driver(CUresult status, const char* call) {
  if (status != CUDA_SUCCESS) {
    throw RuntimeFailure(std::string("elastic KV: ") + call + " failed (CUresult " +
                         std::to_string(int(status)) + ")");
  }
}

CUmemAllocationProp device_memory_prop(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

}  // namespace

KvPoolMemory::KvPoolMemory(int blocks, int segments, uint64_t segment_block_bytes, bool elastic,
                           int device, cudaStream_t stream)
    : elastic_(elastic),
      device_(device),
      blocks_(blocks),
      segments_(segments),
      segment_block_bytes_(segment_block_bytes) {
  if (!elastic_) {
    chunk_blocks_ = blocks;
    segment_blocks_ = blocks;
    const uint64_t bytes = uint64_t(blocks) * uint64_t(segments) * segment_block_bytes;
    base_ = CUdeviceptr(allocate_cuda_memory(CudaMemoryKind::kDevice, bytes,
                                             "the KV cache (" + std::to_string(blocks) + " blocks)"));
    reserved_bytes_ = bytes;
    // Never read before written, except by benchmarks that attend to blocks nothing filled.
    GPUFRAC_CUDA_CHECK(cudaMemsetAsync(data(), 0, bytes, stream));
    return;
  }
  const DriverVmm& vmm = driver_vmm();
  CUmemAllocationProp prop = device_memory_prop(device);
  size_t granularity = 0;
  check_driver(vmm.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
               "cuMemGetAllocationGranularity");
  chunk_blocks_ = kv_chunk_blocks(segment_block_bytes, granularity);
  segment_blocks_ = kv_round_up_to_chunks(blocks, chunk_blocks_);
  reserved_bytes_ = uint64_t(segment_blocks_) * uint64_t(segments) * segment_block_bytes;
  check_driver(vmm.reserve(&base_, reserved_bytes_, granularity, 0, 0), "cuMemAddressReserve");
}

KvPoolMemory::~KvPoolMemory() { free_all(); }

KvPoolMemory::KvPoolMemory(KvPoolMemory&& other) noexcept { *this = std::move(other); }

KvPoolMemory& KvPoolMemory::operator=(KvPoolMemory&& other) noexcept {
  if (this != &other) {
    free_all();
    elastic_ = other.elastic_;
    device_ = other.device_;
    blocks_ = other.blocks_;
    segments_ = other.segments_;
    segment_block_bytes_ = other.segment_block_bytes_;
    chunk_blocks_ = other.chunk_blocks_;
    segment_blocks_ = other.segment_blocks_;
    base_ = std::exchange(other.base_, 0);
    reserved_bytes_ = std::exchange(other.reserved_bytes_, 0);
    handles_ = std::move(other.handles_);
    other.handles_.clear();
  }
  return *this;
}

int KvPoolMemory::backed_blocks() const {
  if (!elastic_) return blocks_;
  return int(std::min<int64_t>(mapped_chunks() * chunk_blocks_, blocks_));
}

uint64_t KvPoolMemory::backed_bytes() const {
  if (!elastic_) return reserved_bytes_;
  return uint64_t(handles_.size()) * chunk_segment_bytes();
}

int KvPoolMemory::back(int blocks, cudaStream_t stream) {
  if (!elastic_) return blocks_;
  const DriverVmm& vmm = driver_vmm();
  const int64_t wanted_chunks =
      kv_round_up_to_chunks(std::min(blocks, blocks_), chunk_blocks_) / chunk_blocks_;
  const uint64_t run = chunk_segment_bytes();
  const uint64_t segment_stride = uint64_t(segment_blocks_) * segment_block_bytes_;
  CUmemAllocationProp prop = device_memory_prop(device_);
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  // A need the process cannot meet now is refused before anything is mapped: cudaMemGetInfo's
  // free is what it may still take (under the memcap shim, within its ceiling and its pool too).
  // Engines that each mapped part of the memory and waited for the rest would take turns forever.
  const int64_t missing_chunks = wanted_chunks - mapped_chunks();
  size_t free_bytes = 0, total_bytes = 0;
  if (missing_chunks > 0 && cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess &&
      free_bytes < uint64_t(missing_chunks) * run * uint64_t(segments_)) {
    return backed_blocks();
  }
  while (mapped_chunks() < wanted_chunks) {
    // One allocation per segment (cuMemMap maps a handle whole, from offset 0).
    const uint64_t offset = uint64_t(mapped_chunks()) * run;
    const size_t first = handles_.size();
    CUresult status = CUDA_SUCCESS;
    for (int s = 0; s < segments_ && status == CUDA_SUCCESS; ++s) {
      CUmemGenericAllocationHandle handle = 0;
      status = vmm.create(&handle, run, &prop, 0);
      if (status != CUDA_SUCCESS) break;
      const CUdeviceptr at = base_ + uint64_t(s) * segment_stride + offset;
      status = vmm.map(at, run, 0, handle, 0);
      if (status == CUDA_SUCCESS) {
        handles_.push_back(handle);
        status = vmm.set_access(at, run, &access, 1);
      } else {
        vmm.release(handle);
      }
    }
    if (status != CUDA_SUCCESS) {
      while (handles_.size() > first) drop_last_segment();
      if (status == CUDA_ERROR_OUT_OF_MEMORY) break;  // the device or the cap refused: wait
      check_driver(status, "cuMemCreate/cuMemMap/cuMemSetAccess");
    }
    for (int s = 0; s < segments_; ++s) {
      GPUFRAC_CUDA_CHECK(cudaMemsetAsync(
          reinterpret_cast<void*>(base_ + uint64_t(s) * segment_stride + offset), 0, run, stream));
    }
  }
  return backed_blocks();
}

void KvPoolMemory::release(int keep_blocks) {
  if (!elastic_) return;
  const int64_t keep_chunks =
      kv_round_up_to_chunks(std::max(keep_blocks, 0), chunk_blocks_) / chunk_blocks_;
  while (mapped_chunks() > keep_chunks) {
    for (int s = 0; s < segments_; ++s) check_driver(drop_last_segment(), "cuMemUnmap/cuMemRelease");
  }
}

CUresult KvPoolMemory::drop_last_segment() {
  const DriverVmm& vmm = driver_vmm();
  const uint64_t run = chunk_segment_bytes();
  const uint64_t segment_stride = uint64_t(segment_blocks_) * segment_block_bytes_;
  const size_t index = handles_.size() - 1;
  const uint64_t chunk = index / size_t(segments_), segment = index % size_t(segments_);
  CUresult unmapped = vmm.unmap(base_ + segment * segment_stride + chunk * run, run);
  CUresult released = vmm.release(handles_.back());
  handles_.pop_back();
  return unmapped == CUDA_SUCCESS ? released : unmapped;
}

void KvPoolMemory::free_all() {
  if (base_ == 0) return;
  if (!elastic_) {
    release_cuda_memory(CudaMemoryKind::kDevice, reinterpret_cast<void*>(base_));
  } else {
    cudaDeviceSynchronize();  // nothing may still use the range
    while (!handles_.empty()) drop_last_segment();
    driver_vmm().address_free(base_, reserved_bytes_);
  }
  base_ = 0;
  handles_.clear();
}

}  // namespace gpufrac::engine
