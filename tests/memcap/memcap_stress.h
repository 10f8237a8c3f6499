// The driver functions the memcap probe resolved (through whichever path it was asked to use),
// and the stress workload that hammers them from many threads: allocate and free at random
// through cuMemAlloc, cuMemAllocAsync, pool allocation and virtual memory (create, map, release
// the handle at once, unmap later), counting what succeeded and what ran out of memory.
#pragma once

#include "fakes/fake_libcuda.h"
#include "memcap/cuda_abi.h"

struct MemcapDriver {
  decltype(&cuInit) init;
  decltype(&cuDevicePrimaryCtxRetain) retain_primary;
  decltype(&cuCtxSetCurrent) set_current;
  decltype(&cuCtxGetDevice) get_device;
  decltype(&cuMemAlloc_v2) alloc;
  decltype(&cuMemFree_v2) free;
  decltype(&cuMemGetInfo_v2) get_info;
  decltype(&cuMemAllocAsync) alloc_async;
  decltype(&cuMemAllocFromPoolAsync) alloc_from_pool;
  decltype(&cuMemFreeAsync) free_async;
  decltype(&cuDeviceGetDefaultMemPool) default_pool;
  decltype(&cuMemCreate) create;
  decltype(&cuMemRelease) release;
  decltype(&cuMemAddressReserve) address_reserve;
  decltype(&cuMemMap) map;
  decltype(&cuMemUnmap) unmap;
  decltype(&cuMemSetAccess) set_access;
};

struct StressCounts {
  unsigned long long ok = 0;
  unsigned long long oom = 0;
  unsigned long long other = 0;  // any other error: a bug in the shim or the fake
};

// Runs `threads` threads of `iterations` operations each on device 0 (whose primary context the
// calling thread has current), allocations of 1..max_mib MiB; frees everything at the end.
StressCounts run_stress(const MemcapDriver& driver, int threads, int iterations, int max_mib,
                        unsigned seed);
