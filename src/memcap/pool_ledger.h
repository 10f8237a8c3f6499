// A device's memory pool: tenants with a floor and a ceiling share what the device has left. One
// small file per pool in the state directory (<state dir>/<pool name>.<device UUID>.pool, a
// StateFile), mapped shared by every process of every tenant in the pool. It holds the pool's
// bytes and, per tenant (a member), its floor, its charge and the processes that joined for it.
//
// The rule: a member's charge is max(used, floor), where used is what its tenant ledger counts on
// the device; the pool's commitment is the sum of the charges. A reservation of n bytes succeeds
// only if used + n <= ceiling (the tenant ledger's cap) and, when it takes the tenant above its
// floor, the commitment after it stays <= the pool's bytes. A tenant that joins commits its floor;
// it is refused when the members' floors leave no room for it. So no tenant exceeds its ceiling,
// and the bytes of every floor stay out of the others' reach. (A tenant that joins while the others
// use the remainder is owed its floor: nobody grows above a floor until they give memory back.)
//
// Concurrency: the rule spans two counters (the tenant's and the pool's) and a max(), which one
// compare-and-swap cannot update together, so every reservation and release of a pooled tenant
// runs under the pool's lock: a word in the file holding the identity of the process that holds
// it (process_identity.h). A process that dies holding it (kill -9) is found dead by the next one
// that waits, which takes the lock over; no state needs repair, because each field is written by
// one store (a member is published last) and the commitment is summed afresh each time. Inside a
// process, threads take turns on a process-wide mutex first (so the lock word equal to our own
// identity can only be the image before an exec). The lock is held for a few dozen loads and
// stores, never across a driver call.
//
// Members whose processes are all gone are freed (reclaim_gone_tenants): at join, before a
// reservation is refused, and at memory reports. A fork child joins for itself at its first
// reservation; an exec'd image finds its identity already joined.
//
// Thread-safe. Call before_fork() / after_fork_in_parent() / after_fork_in_child() from the
// process's fork handlers, and forget_after_fork() on every pool in the child. The mapping lives
// until close(); there is deliberately no destructor (see tenant_ledger.h).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <atomic>

#include "memcap/memcap_config.h"
#include "memcap/state_file.h"
#include "memcap/tenant_ledger.h"

namespace gpufrac::memcap {

inline constexpr int kMaxPoolTenants = 64;  // MPS itself takes at most 48 clients per GPU

struct PoolFile;  // the shared layout, defined in pool_ledger.cpp

class PoolLedger {
 public:
  enum class Reservation { kReserved, kOverCeiling, kOverPool, kNoSlot };

  struct Usage {
    uint64_t pool_bytes = 0;
    uint64_t committed = 0;  // the members' charges
    uint64_t floors = 0;
    int tenants = 0;
  };

  constexpr PoolLedger() = default;
  PoolLedger(const PoolLedger&) = delete;
  PoolLedger& operator=(const PoolLedger&) = delete;

  // Maps <state_dir>/<pool>.<device_uuid>.pool. On failure returns false with one line in `error`.
  bool open(const char* state_dir, const char* pool, const char* device_uuid, char* error,
            size_t error_size);
  void close();
  bool is_open() const { return pool_ != nullptr; }
  void remove_if_last_user() { file_.remove_if_last_user(); }
  const char* path() const { return file_.path(); }
  // As in TenantLedger: which process this pool speaks for (tests play several in one).
  void set_identity(uint64_t identity) { identity_.store(identity); }

  // Makes `tenant` a member with `floor` committed (unless it is one already) and this process
  // one of its processes. `pool_bytes` must match what the pool's members gave. On failure
  // returns false with one line in `error`: the floors leave no room, other pool bytes or another
  // floor for the tenant, no free member or process entry, or /proc unreadable.
  bool join(const char* tenant, uint64_t floor, uint64_t pool_bytes, char* error,
            size_t error_size);

  // Reserves for the joined tenant through its ledger `tenant` (device = the ledger's device).
  // kNoSlot: no slot for this process in the tenant ledger or the pool, or the tenant could not
  // join again (a fork child whose tenant's processes are all gone): one line in `why`.
  Reservation reserve(TenantLedger& tenant, int device, uint64_t bytes, uint64_t ceiling, char* why,
                      size_t why_size);
  void release(TenantLedger& tenant, int device, uint64_t bytes);
  // How much more the joined tenant may take under the pool (its ceiling aside).
  uint64_t room(const TenantLedger& tenant, int device) const;

  // Frees the members whose processes are all gone; returns how many.
  int reclaim_gone_tenants();
  Usage usage() const;

  static void before_fork();
  static void after_fork_in_parent();
  static void after_fork_in_child();
  void forget_after_fork();

 private:
  class Locked;
  int member_locked(char* error, size_t error_size);
  bool register_process_locked(int member);
  uint64_t identity();

  StateFile file_;
  PoolFile* pool_ = nullptr;  // file_'s mapping
  std::atomic<int> member_{-1};
  std::atomic<bool> registered_{false};
  std::atomic<uint64_t> identity_{0};
  char tenant_[kMaxTenantLength + 1] = {};
  uint64_t floor_ = 0;
  uint64_t pool_bytes_ = 0;
};

}  // namespace gpufrac::memcap
