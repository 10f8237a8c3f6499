#include "memcap_stress.h"

#include <atomic>
#include <random>
#include <thread>
#include <vector>

namespace {

constexpr int kHeldPerThread = 6;

struct Held {
  int kind;  // 0 cuMemAlloc, 1 async, 2 pool, 3 virtual memory
  CUdeviceptr ptr;
  size_t size;
};

CUresult allocate(const MemcapDriver& d, int kind, size_t size, Held* held) {
  held->kind = kind;
  held->size = size;
  switch (kind) {
    case 0:
      return d.alloc(&held->ptr, size);
    case 1:
      return d.alloc_async(&held->ptr, size, nullptr);
    case 2: {
      CUmemoryPool pool = nullptr;
      if (CUresult result = d.default_pool(&pool, 0); result != CUDA_SUCCESS) return result;
      return d.alloc_from_pool(&held->ptr, size, pool, nullptr);
    }
    default: {
      CUmemAllocationProp prop = {};
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
      CUmemGenericAllocationHandle handle = 0;
      if (CUresult result = d.create(&handle, size, &prop, 0); result != CUDA_SUCCESS) {
        return result;
      }
      CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, 3};
      CUresult result = d.address_reserve(&held->ptr, size, 0, 0, 0);
      if (result == CUDA_SUCCESS) result = d.map(held->ptr, size, 0, handle, 0);
      if (result == CUDA_SUCCESS) result = d.set_access(held->ptr, size, &access, 1);
      CUresult released = d.release(handle);  // the mapping keeps the memory alive
      return result != CUDA_SUCCESS ? result : released;
    }
  }
}

CUresult release(const MemcapDriver& d, const Held& held) {
  switch (held.kind) {
    case 0:
      return d.free(held.ptr);
    case 1:
    case 2:
      return d.free_async(held.ptr, nullptr);
    default:
      return d.unmap(held.ptr, held.size);
  }
}

}  // namespace

StressCounts run_stress(const MemcapDriver& d, int threads, int iterations, int max_mib,
                        unsigned seed) {
  CUcontext context = nullptr;
  d.retain_primary(&context, 0);
  std::atomic<unsigned long long> ok{0}, oom{0}, other{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      d.set_current(context);
      std::mt19937 rng(seed * 7919u + unsigned(t));
      Held held[kHeldPerThread];
      int count = 0;
      auto count_result = [&](CUresult result) {
        (result == CUDA_SUCCESS ? ok : result == CUDA_ERROR_OUT_OF_MEMORY ? oom : other)++;
      };
      for (int i = 0; i < iterations; ++i) {
        if (count < kHeldPerThread && (count == 0 || rng() % 3 != 0)) {
          int kind = int(rng() % 4);
          size_t size = size_t(1 + rng() % unsigned(max_mib)) << 20;
          if (kind == 3) size = (size + kFakeGranularity - 1) / kFakeGranularity * kFakeGranularity;
          CUresult result = allocate(d, kind, size, &held[count]);
          count_result(result);
          if (result == CUDA_SUCCESS) ++count;
        } else {
          int victim = int(rng() % unsigned(count));
          if (release(d, held[victim]) != CUDA_SUCCESS) ++other;
          held[victim] = held[--count];
        }
      }
      while (count > 0) {
        if (release(d, held[--count]) != CUDA_SUCCESS) ++other;
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  return {ok.load(), oom.load(), other.load()};
}
