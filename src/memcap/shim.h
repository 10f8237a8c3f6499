// The memory cap's process-wide state, shared by the interposed entry points (hooks_*.cpp):
// the configuration (read when the library is loaded), the tenant ledger (opened at the first
// CUDA call that needs it), the tables of what this process has counted, and fork handling (the
// child of a fork starts with empty tables and claims its own ledger slot).
//
// Fail closed: if a cap was asked for but the configuration is invalid or the ledger cannot be
// opened, ensure_ready() says so on stderr once and returns CUDA_ERROR_NOT_PERMITTED, and every
// interposed allocation and memory query is refused instead of running uncapped.
//
// Everything here is thread-safe. No exceptions, no C++ runtime state: the library is preloaded
// into processes of every kind.
#pragma once

#include <pthread.h>
#include <stdint.h>

#include "memcap/allocation_table.h"
#include "memcap/cuda_abi.h"
#include "memcap/memcap_config.h"

namespace gpufrac::memcap {

const MemcapConfig& config();
inline bool cap_requested() {
  return config().enabled;
}
bool device_capped(int device);

// CUDA_SUCCESS when capping works (or no cap was asked for), else CUDA_ERROR_NOT_PERMITTED.
CUresult ensure_ready();

// After cuInit: joins the pool of every pooled device the process sees (pool_ledger.h). When one
// cannot be joined (the floors no longer fit, ...) says why once and refuses CUDA from then on,
// as ensure_ready() does: returns CUDA_ERROR_NOT_PERMITTED.
CUresult join_pools();

// "6a0f2c41-1122-3344-5566-7708090a0b00": the UUID as NVML prints it, without "GPU-".
void format_uuid(const CUuuid& uuid, char* out, size_t size);

// Lines on stderr, prefixed "gpufrac memcap: ".
void say(const char* format, ...) __attribute__((format(printf, 1, 2)));

// Device of the calling thread's current context / of a stream; -1 when unknown.
int current_device();
uint64_t current_context();
int stream_device(CUstream stream);

// Reserves against the tenant's cap on a capped device (and under its pool's rule on a pooled
// one); false (with a note on stderr) when the bytes do not fit. Every true must be matched by
// release_bytes() once the memory is gone.
bool reserve_bytes(int device, uint64_t bytes);
void release_bytes(int device, uint64_t bytes);

// Clamps a (free, total) report for a capped device: total = min(total, cap),
// free = min(free, cap - used, total, on a pooled device what the pool lets the tenant grow by),
// saturating at zero. Uncapped devices are left alone.
// Device -1 (an NVML device CUDA does not show) is clamped by a cap set for all devices, with
// nothing counted as used.
void clamp_report(int device, uint64_t* free_bytes, uint64_t* total_bytes);

// The tables, each with its lock. Keys: device pointers (with the context they belong to in
// `link`), allocation handles, mapped addresses, memory pools.
struct GuardedTable {
  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  AllocationTable table;
};
GuardedTable& pointer_table();
GuardedTable& handle_table();
GuardedTable& mapping_table();
GuardedTable& pool_table();

class TableLock {
 public:
  explicit TableLock(GuardedTable& guarded) : guarded_(guarded) {
    pthread_mutex_lock(&guarded_.lock);
  }
  ~TableLock() { pthread_mutex_unlock(&guarded_.lock); }
  TableLock(const TableLock&) = delete;
  TableLock& operator=(const TableLock&) = delete;
  AllocationTable& table() { return guarded_.table; }

 private:
  GuardedTable& guarded_;
};

// Inserts `key` into a locked table; nullptr only when host memory ran out (the bytes then stay
// counted for the life of the process: too strict, never too lax).
AllocationRecord* insert_record(TableLock& locked, uint64_t key, bool* existed);

}  // namespace gpufrac::memcap
