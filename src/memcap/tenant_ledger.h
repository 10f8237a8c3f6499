// A tenant's memory ledger: one small file per tenant in the state directory, mapped shared by
// every process of the tenant. It holds, per device, the bytes the tenant has reserved (the
// counter), and per process a slot with the bytes that process reserved.
//
// Protocol (lock-free; each step is one atomic operation on the shared mapping):
//   reserve(d, n): add n to this process's slot, then move the tenant counter from c to c + n
//                  by compare-and-swap, only while c + n <= cap; if it does not fit, take n back
//                  out of the slot. The caller then calls the driver and release()s on failure.
//   release(d, n): counter -= n, then slot -= n.
// Hence at every instant counter >= bytes really reserved (so the cap holds across processes and
// threads), and the sum of the slots >= counter. A process that dies leaves only its slot behind:
// reclaim zeroes the slots of dead processes (see process_identity.h) and recounts each counter
// from the slots with a compare-and-swap that fails if the counter moved during the count (the
// counter word carries a generation number). A recount never undercounts; an overcount (another
// process's reservation in flight during the count) only makes the cap stricter, and reserve()
// recounts once before it reports out-of-memory, which heals it.
//
// The file is a StateFile (state_file.h): the last process to leave removes it, so that ledgers of
// tenants that are gone do not pile up in the state directory.
//
// Thread-safe. Not async-signal-safe except forget_slot_after_fork(), which a fork child must call
// before anything else (the child then gets a fresh slot at its first reservation). The mapping
// lives until close(); there is deliberately no destructor, so that the shim's ledger stays
// usable by other threads while the process exits.
#pragma once

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <atomic>

#include "memcap/memcap_config.h"
#include "memcap/state_file.h"

namespace gpufrac::memcap {

inline constexpr int kMaxTenantProcesses = 256;

struct LedgerFile;  // the shared layout, defined in tenant_ledger.cpp
struct LedgerSlot;

class TenantLedger {
 public:
  enum class Reservation { kReserved, kOverCap, kNoSlot };

  constexpr TenantLedger() = default;
  TenantLedger(const TenantLedger&) = delete;
  TenantLedger& operator=(const TenantLedger&) = delete;

  // Maps <state_dir>/<tenant>.ledger (creating the directory with mode 0700 and the file with
  // mode 0600 if needed). On failure returns false with a one-line reason in `error`.
  bool open(const char* state_dir, const char* tenant, char* error, size_t error_size);
  void close();
  bool is_open() const { return ledger_ != nullptr; }
  // Removes the file if no other process has it open. Leaves this process's mapping usable (but
  // gives up its lock): call it on the way out.
  void remove_if_last_user();
  const char* path() const { return file_.path(); }

  // Which process this ledger speaks for; by default (0) this process, read at first use. Tests
  // set other identities to play several processes in one.
  void set_identity(uint64_t identity) { identity_.store(identity); }

  // Reserves `bytes` on `device` (< kMaxDevices) if the tenant's total stays within `cap`.
  // kNoSlot: all kMaxTenantProcesses slots belong to live processes (nothing reserved).
  Reservation reserve(int device, uint64_t bytes, uint64_t cap);
  void release(int device, uint64_t bytes);

  // Bytes the tenant has reserved on `device` (may briefly overcount, never undercounts).
  uint64_t used(int device) const;
  // Bytes this process's slot holds on `device` (0 without a slot).
  uint64_t own_reserved(int device) const;

  // Frees the slots of processes that are gone and recounts; returns how many were freed.
  int reclaim_dead_processes();

  void forget_slot_after_fork();

 private:
  LedgerSlot* own_slot();
  int reclaim(bool claiming);
  void recount(int device);
  uint64_t identity();

  StateFile file_;
  LedgerFile* ledger_ = nullptr;  // file_'s mapping
  std::atomic<int> slot_{-1};
  std::atomic<uint64_t> identity_{0};
  pthread_mutex_t claim_lock_ = PTHREAD_MUTEX_INITIALIZER;
};

}  // namespace gpufrac::memcap
