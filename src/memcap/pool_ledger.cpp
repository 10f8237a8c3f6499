#include "memcap/pool_ledger.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "memcap/process_identity.h"

namespace gpufrac::memcap {
namespace {

constexpr uint64_t kMagic = 0x3176'6c6f'6f70'6367ull;  // "gcpoolv1"
constexpr int kSpinsBetweenLivenessChecks = 256;

// This process's threads take turns before they contend for the lock word (see the header).
constinit pthread_mutex_t g_turn = PTHREAD_MUTEX_INITIALIZER;

uint64_t saturating_add(uint64_t a, uint64_t b) {
  uint64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}

uint64_t saturating_sub(uint64_t a, uint64_t b) {
  return a > b ? a - b : 0;
}

void pause_briefly(int spin) {
  if (spin < 64) {
    sched_yield();
    return;
  }
  struct timespec wait = {0, 50'000};
  nanosleep(&wait, nullptr);
}

}  // namespace

struct PoolMember {
  std::atomic<uint64_t> in_use;  // 1: a tenant's; set last when it joins, cleared first when freed
  std::atomic<uint64_t> floor;
  std::atomic<uint64_t> charge;  // max(used, floor) after the tenant's last reservation or release
  char tenant[kMaxTenantLength + 1];                     // written and read under the lock
  std::atomic<uint64_t> processes[kMaxTenantProcesses];  // identities that joined; 0: free
};

struct PoolFile {
  StateFileHeader header;
  std::atomic<uint64_t> lock;  // 0, or the identity of the process that holds it
  std::atomic<uint64_t> pool_bytes;
  PoolMember members[kMaxPoolTenants];
};

static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "the pool needs lock-free 64-bit atomics");

namespace {

bool pool_in_use(const void* mapping) {
  for (const PoolMember& member : static_cast<const PoolFile*>(mapping)->members) {
    if (member.in_use.load() != 0) return true;
  }
  return false;
}

// Sum of the charges of the members other than `except`.
uint64_t committed_except(const PoolFile& pool, int except) {
  uint64_t total = 0;
  for (int i = 0; i < kMaxPoolTenants; ++i) {
    if (i != except && pool.members[i].in_use.load() != 0) {
      total = saturating_add(total, pool.members[i].charge.load());
    }
  }
  return total;
}

uint64_t floors_of(const PoolFile& pool) {
  uint64_t total = 0;
  for (const PoolMember& member : pool.members) {
    if (member.in_use.load() != 0) total = saturating_add(total, member.floor.load());
  }
  return total;
}

int members_of(const PoolFile& pool) {
  int count = 0;
  for (const PoolMember& member : pool.members) count += member.in_use.load() != 0;
  return count;
}

// Zeroes the process entries of processes that are gone (lock-free: one compare-and-swap each,
// which fails if the entry changed meanwhile).
void clear_dead_processes(PoolFile& pool, uint64_t me) {
  for (PoolMember& member : pool.members) {
    if (member.in_use.load() == 0) continue;
    for (std::atomic<uint64_t>& process : member.processes) {
      uint64_t identity = process.load();
      if (identity != 0 && identity != me && !identity_alive(identity)) {
        process.compare_exchange_strong(identity, 0);
      }
    }
  }
}

bool has_processes(const PoolMember& member) {
  for (const std::atomic<uint64_t>& process : member.processes) {
    if (process.load() != 0) return true;
  }
  return false;
}

// Under the lock: frees the members left without processes.
int free_gone_members(PoolFile& pool) {
  int freed = 0;
  for (PoolMember& member : pool.members) {
    if (member.in_use.load() == 0 || has_processes(member)) continue;
    member.in_use.store(0);
    member.charge.store(0);
    member.floor.store(0);
    ++freed;
  }
  return freed;
}

}  // namespace

// Holds the pool's lock for its scope (nothing when this process's identity is unknown: held()).
class PoolLedger::Locked {
 public:
  explicit Locked(PoolLedger& ledger) : word_(ledger.pool_->lock), me_(ledger.identity()) {
    pthread_mutex_lock(&g_turn);
    if (me_ != 0) acquire();
  }
  ~Locked() {
    if (me_ != 0) word_.store(0, std::memory_order_release);
    pthread_mutex_unlock(&g_turn);
  }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;
  bool held() const { return me_ != 0; }

 private:
  void acquire() {
    for (int spin = 0;; ++spin) {
      uint64_t holder = 0;
      if (word_.compare_exchange_weak(holder, me_, std::memory_order_acquire)) return;
      if (holder == 0) continue;
      // Our own identity: the image of this pid before an exec held it (no thread of this image
      // does, since we have our turn). Another: take it over only once it is surely gone.
      bool gone =
          holder == me_ || (spin % kSpinsBetweenLivenessChecks == kSpinsBetweenLivenessChecks - 1 &&
                            !identity_alive(holder));
      if (gone && word_.compare_exchange_strong(holder, me_, std::memory_order_acquire)) return;
      pause_briefly(spin);
    }
  }

  std::atomic<uint64_t>& word_;
  const uint64_t me_;
};

bool PoolLedger::open(const char* state_dir, const char* pool, const char* device_uuid, char* error,
                      size_t error_size) {
  close();
  char path[StateFile::kMaxStatePathLength + 1];
  char owners[2 * kMaxTenantLength + 16];
  snprintf(path, sizeof path, "%s/%s.%s.pool", state_dir, pool, device_uuid);
  snprintf(owners, sizeof owners, "pool '%s' on %s", pool, device_uuid);
  if (!file_.open(state_dir, path, sizeof(PoolFile), kMagic, "memory pool", owners, pool_in_use,
                  error, error_size)) {
    return false;
  }
  pool_ = static_cast<PoolFile*>(file_.mapping());
  return true;
}

void PoolLedger::close() {
  file_.close();
  pool_ = nullptr;
  member_.store(-1);
  registered_.store(false);
}

uint64_t PoolLedger::identity() {
  uint64_t identity = identity_.load();
  if (identity == 0) {
    identity = current_process_identity();
    identity_.store(identity);
  }
  return identity;
}

bool PoolLedger::join(const char* tenant, uint64_t floor, uint64_t pool_bytes, char* error,
                      size_t error_size) {
  Locked locked(*this);
  if (!locked.held()) {
    snprintf(error, error_size, "cannot join the memory pool %s: /proc/self/stat is unreadable",
             path());
    return false;
  }
  snprintf(tenant_, sizeof tenant_, "%s", tenant);
  floor_ = floor;
  pool_bytes_ = pool_bytes;
  member_.store(-1);
  registered_.store(false);
  return member_locked(error, error_size) >= 0;
}

// The joined tenant's member, made (and this process registered) if need be; -1 with a reason.
int PoolLedger::member_locked(char* error, size_t error_size) {
  int index = member_.load();
  auto ours = [&](int i) {
    return pool_->members[i].in_use.load() != 0 &&
           strncmp(pool_->members[i].tenant, tenant_, sizeof tenant_) == 0;
  };
  if (index < 0 || !ours(index)) {
    index = -1;
    registered_.store(false);
    for (int i = 0; i < kMaxPoolTenants && index < 0; ++i) {
      if (ours(i)) index = i;
    }
  }
  char floor_text[32], limit[32], taken[32];
  format_size(floor_, floor_text, sizeof floor_text);
  if (index >= 0 && pool_->members[index].floor.load() != floor_) {
    format_size(pool_->members[index].floor.load(), taken, sizeof taken);
    snprintf(error, error_size,
             "tenant '%s' is in the memory pool %s with a floor of %s, this process gives %s: "
             "give every process of a tenant the same %s",
             tenant_, path(), taken, floor_text, kEnvFloorBytes);
    return -1;
  }
  if (index < 0) {
    uint64_t me = identity();
    if (floors_of(*pool_) + floor_ > pool_bytes_ || members_of(*pool_) == kMaxPoolTenants) {
      clear_dead_processes(*pool_, me);
      free_gone_members(*pool_);
    }
    if (members_of(*pool_) == 0) pool_->pool_bytes.store(pool_bytes_);
    uint64_t shared = pool_->pool_bytes.load();
    format_size(shared, limit, sizeof limit);
    if (shared != pool_bytes_) {
      format_size(pool_bytes_, taken, sizeof taken);
      snprintf(error, error_size,
               "the memory pool %s holds %s, this process gives %s: give every tenant of a pool "
               "the same %s",
               path(), limit, taken, kEnvPoolBytes);
      return -1;
    }
    uint64_t floors = floors_of(*pool_);
    if (floors + floor_ > pool_bytes_) {
      format_size(floors, taken, sizeof taken);
      snprintf(error, error_size,
               "cannot join the memory pool %s: the floors of the tenants in it take %s of its "
               "%s, no room for tenant '%s''s floor of %s; lower %s or raise %s",
               path(), taken, limit, tenant_, floor_text, kEnvFloorBytes, kEnvPoolBytes);
      return -1;
    }
    for (int i = 0; i < kMaxPoolTenants && index < 0; ++i) {
      if (pool_->members[i].in_use.load() == 0) index = i;
    }
    if (index < 0) {
      snprintf(error, error_size,
               "cannot join the memory pool %s: it has %d tenants, the most it holds", path(),
               kMaxPoolTenants);
      return -1;
    }
    PoolMember& member = pool_->members[index];
    for (std::atomic<uint64_t>& process : member.processes) process.store(0);
    memcpy(member.tenant, tenant_, sizeof member.tenant);
    member.floor.store(floor_);
    member.charge.store(floor_);
    member.processes[0].store(me);
    registered_.store(true);
    member.in_use.store(1);  // published last
  }
  member_.store(index);
  if (!registered_.load()) {
    if (!register_process_locked(index)) {
      snprintf(error, error_size,
               "tenant '%s' has %d live processes in the memory pool %s, the most it holds",
               tenant_, kMaxTenantProcesses, path());
      return -1;
    }
    registered_.store(true);
  }
  return index;
}

bool PoolLedger::register_process_locked(int member) {
  const uint64_t me = identity();
  std::atomic<uint64_t>* processes = pool_->members[member].processes;
  for (int i = 0; i < kMaxTenantProcesses; ++i) {
    if (processes[i].load() == me) return true;  // this image, or the one before an exec
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (int i = 0; i < kMaxTenantProcesses; ++i) {
      uint64_t expected = 0;
      if (processes[i].compare_exchange_strong(expected, me)) return true;
    }
    clear_dead_processes(*pool_, me);
  }
  return false;
}

PoolLedger::Reservation PoolLedger::reserve(TenantLedger& tenant, int device, uint64_t bytes,
                                            uint64_t ceiling, char* why, size_t why_size) {
  if (bytes == 0) return Reservation::kReserved;
  Locked locked(*this);
  if (!locked.held()) {
    snprintf(why, why_size, "cannot use the memory pool %s: /proc/self/stat is unreadable", path());
    return Reservation::kNoSlot;
  }
  int index = member_locked(why, why_size);
  if (index < 0) return Reservation::kNoSlot;
  PoolMember& member = pool_->members[index];
  uint64_t after = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    after = saturating_add(tenant.used(device), bytes);
    bool fits_pool =
        after <= floor_ || saturating_add(committed_except(*pool_, index), after) <= pool_bytes_;
    if (after <= ceiling && fits_pool) {
      TenantLedger::Reservation reserved = tenant.reserve(device, bytes, ceiling);
      if (reserved == TenantLedger::Reservation::kNoSlot) {
        snprintf(why, why_size,
                 "no free slot in %s (%d live processes of tenant '%s', or /proc unreadable)",
                 tenant.path(), kMaxTenantProcesses, tenant_);
        return Reservation::kNoSlot;
      }
      if (reserved == TenantLedger::Reservation::kReserved) {
        uint64_t used = tenant.used(device);
        member.charge.store(used > floor_ ? used : floor_);
        return Reservation::kReserved;
      }
    }
    if (attempt == 0) {  // before saying no: free what dead processes and gone tenants hold
      tenant.reclaim_dead_processes();
      clear_dead_processes(*pool_, identity());
      free_gone_members(*pool_);
    }
  }
  return after > ceiling ? Reservation::kOverCeiling : Reservation::kOverPool;
}

void PoolLedger::release(TenantLedger& tenant, int device, uint64_t bytes) {
  if (bytes == 0) return;
  Locked locked(*this);
  tenant.release(device, bytes);
  int index = member_.load();
  if (!locked.held() || index < 0 || !registered_.load()) return;
  uint64_t used = tenant.used(device);
  pool_->members[index].charge.store(used > floor_ ? used : floor_);
}

uint64_t PoolLedger::room(const TenantLedger& tenant, int device) const {
  int index = member_.load();
  if (index < 0) return 0;
  uint64_t used = tenant.used(device);
  uint64_t held = saturating_add(committed_except(*pool_, index), used);
  uint64_t in_pool = saturating_sub(pool_bytes_, held);
  uint64_t in_floor = saturating_sub(floor_, used);
  return in_pool > in_floor ? in_pool : in_floor;
}

int PoolLedger::reclaim_gone_tenants() {
  clear_dead_processes(*pool_, identity());
  bool any_gone = false;
  for (const PoolMember& member : pool_->members) {
    any_gone = any_gone || (member.in_use.load() != 0 && !has_processes(member));
  }
  if (!any_gone) return 0;
  Locked locked(*this);
  return locked.held() ? free_gone_members(*pool_) : 0;
}

PoolLedger::Usage PoolLedger::usage() const {
  Usage usage;
  usage.pool_bytes = pool_->pool_bytes.load();
  usage.committed = committed_except(*pool_, -1);
  usage.floors = floors_of(*pool_);
  usage.tenants = members_of(*pool_);
  return usage;
}

void PoolLedger::before_fork() {
  pthread_mutex_lock(&g_turn);
}

void PoolLedger::after_fork_in_parent() {
  pthread_mutex_unlock(&g_turn);
}

void PoolLedger::after_fork_in_child() {
  pthread_mutex_unlock(&g_turn);  // locked by this thread in before_fork()
}

void PoolLedger::forget_after_fork() {
  registered_.store(false);
  identity_.store(0);
  file_.reopen_lock_after_fork();
}

}  // namespace gpufrac::memcap
