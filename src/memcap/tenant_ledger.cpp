#include "memcap/tenant_ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memcap/process_identity.h"

namespace gpufrac::memcap {

// Counter word: generation (20 bits) | bytes (44 bits). Every change bumps the generation so that
// a recount's compare-and-swap fails if anything moved while it summed the slots.
namespace {

constexpr int kBytesBits = 44;
constexpr uint64_t kBytesMask = (uint64_t(1) << kBytesBits) - 1;
constexpr uint64_t kMagic = 0x3176'6c65'646c'6367ull;  // "gcldlev1"

uint64_t counter_bytes(uint64_t word) {
  return word & kBytesMask;
}
uint64_t next_counter(uint64_t word, uint64_t bytes) {
  return (((word >> kBytesBits) + 1) << kBytesBits) | (bytes & kBytesMask);
}

void subtract_saturating(std::atomic<uint64_t>& value, uint64_t amount) {
  uint64_t current = value.load();
  while (!value.compare_exchange_weak(current, current > amount ? current - amount : 0)) {
  }
}

// Opens (creating) the ledger file with a shared lock held for as long as it is open. The last
// user removes the file (remove_if_last_user); if that happened between our open and our lock,
// the name no longer leads to what we opened, so open again.
int open_locked(const char* path) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    int fd = ::open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return -1;
    struct stat opened, named;
    if (flock(fd, LOCK_SH) == 0 && fstat(fd, &opened) == 0 && stat(path, &named) == 0 &&
        opened.st_ino == named.st_ino && opened.st_dev == named.st_dev) {
      return fd;
    }
    ::close(fd);
  }
  errno = EAGAIN;
  return -1;
}

uint64_t pid_namespace_id() {
  struct stat st;
  if (stat("/proc/self/ns/pid", &st) != 0) return 0;
  return uint64_t(st.st_ino);
}

}  // namespace

struct LedgerSlot {
  std::atomic<uint64_t> owner;  // 0: free; identity; or kIdentityFlagBit | reclaimer's identity
  std::atomic<uint64_t> reserved[kMaxDevices];
};

struct alignas(64) LedgerCounter {
  std::atomic<uint64_t> word;
};

struct LedgerFile {
  std::atomic<uint64_t> magic;
  std::atomic<uint64_t> pid_namespace;  // processes of one tenant must see the same pids
  LedgerCounter counters[kMaxDevices];
  LedgerSlot slots[kMaxTenantProcesses];
};

static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "the ledger needs lock-free 64-bit atomics");

bool TenantLedger::open(const char* state_dir, const char* tenant, char* error, size_t error_size) {
  close();
  if (mkdir(state_dir, 0700) != 0 && errno != EEXIST) {
    snprintf(error, error_size, "cannot create %s='%s': %s (point it at a writable directory)",
             kEnvStateDir, state_dir, strerror(errno));
    return false;
  }
  snprintf(path_, sizeof path_, "%s/%s.ledger", state_dir, tenant);
  int fd = open_locked(path_);
  if (fd < 0) {
    snprintf(error, error_size, "cannot open the tenant ledger %s: %s (check %s)", path_,
             strerror(errno), kEnvStateDir);
    return false;
  }
  struct stat st;
  bool sized =
      fstat(fd, &st) == 0 && (st.st_size == off_t(sizeof(LedgerFile)) ||
                              (st.st_size == 0 && ftruncate(fd, off_t(sizeof(LedgerFile))) == 0));
  if (!sized) {
    snprintf(error, error_size,
             "the tenant ledger %s has an unexpected size (another gpufrac version?); remove it "
             "once no process of tenant '%s' runs",
             path_, tenant);
    ::close(fd);
    return false;
  }
  void* mapping = mmap(nullptr, sizeof(LedgerFile), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapping == MAP_FAILED) {
    snprintf(error, error_size, "cannot map the tenant ledger %s: %s", path_, strerror(errno));
    ::close(fd);
    return false;
  }
  LedgerFile* file = static_cast<LedgerFile*>(mapping);
  uint64_t magic = 0;
  if (!file->magic.compare_exchange_strong(magic, kMagic) && magic != kMagic) {
    snprintf(error, error_size, "%s is not a gpufrac memcap ledger; remove it", path_);
    munmap(mapping, sizeof(LedgerFile));
    ::close(fd);
    return false;
  }
  // Liveness checks compare pids, so every process of a tenant must share one pid namespace.
  uint64_t namespace_id = pid_namespace_id();
  uint64_t stored = file->pid_namespace.load();
  while (stored != namespace_id) {
    bool owned = false;
    for (const LedgerSlot& slot : file->slots) owned = owned || slot.owner.load() != 0;
    if (stored != 0 && owned) {
      snprintf(error, error_size,
               "the tenant ledger %s is in use from another PID namespace (container); give each "
               "container its own %s",
               path_, kEnvStateDir);
      munmap(mapping, sizeof(LedgerFile));
      ::close(fd);
      return false;
    }
    if (file->pid_namespace.compare_exchange_strong(stored, namespace_id)) break;
  }
  file_ = file;
  fd_ = fd;
  return true;
}

void TenantLedger::close() {
  if (file_ != nullptr) munmap(file_, sizeof(LedgerFile));
  if (fd_ >= 0) ::close(fd_);
  file_ = nullptr;
  fd_ = -1;
  slot_.store(-1);
}

void TenantLedger::remove_if_last_user() {
  // Converting the shared lock to an exclusive one succeeds only if no other process holds the
  // file open; one that opens it now finds the name gone once it has its lock, and starts afresh.
  if (fd_ >= 0 && flock(fd_, LOCK_EX | LOCK_NB) == 0) unlink(path_);
}

uint64_t TenantLedger::identity() {
  uint64_t identity = identity_.load();
  if (identity == 0) {
    identity = current_process_identity();
    identity_.store(identity);
  }
  return identity;
}

LedgerSlot* TenantLedger::own_slot() {
  int index = slot_.load(std::memory_order_acquire);
  if (index >= 0) return &file_->slots[index];
  pthread_mutex_lock(&claim_lock_);
  index = slot_.load();
  const uint64_t me = identity();
  if (index < 0 && me != 0) {
    reclaim(/*claiming=*/true);
    for (int i = 0; i < kMaxTenantProcesses && index < 0; ++i) {
      uint64_t expected = 0;
      if (file_->slots[i].owner.compare_exchange_strong(expected, me)) index = i;
    }
    if (index >= 0) slot_.store(index, std::memory_order_release);
  }
  pthread_mutex_unlock(&claim_lock_);
  return index >= 0 ? &file_->slots[index] : nullptr;
}

TenantLedger::Reservation TenantLedger::reserve(int device, uint64_t bytes, uint64_t cap) {
  if (bytes == 0) return Reservation::kReserved;
  LedgerSlot* slot = own_slot();
  if (slot == nullptr) return Reservation::kNoSlot;
  if (bytes > cap || bytes > kBytesMask) return Reservation::kOverCap;
  std::atomic<uint64_t>& counter = file_->counters[device].word;
  for (int attempt = 0; attempt < 2; ++attempt) {
    slot->reserved[device].fetch_add(bytes);
    uint64_t word = counter.load();
    while (counter_bytes(word) + bytes <= cap) {
      if (counter.compare_exchange_weak(word, next_counter(word, counter_bytes(word) + bytes))) {
        return Reservation::kReserved;
      }
    }
    subtract_saturating(slot->reserved[device], bytes);
    if (attempt == 0) {  // before saying no: free what dead processes hold, heal any overcount
      reclaim(/*claiming=*/false);
      recount(device);
    }
  }
  return Reservation::kOverCap;
}

void TenantLedger::release(int device, uint64_t bytes) {
  int index = slot_.load(std::memory_order_acquire);
  if (bytes == 0 || index < 0) return;
  std::atomic<uint64_t>& counter = file_->counters[device].word;
  uint64_t word = counter.load();
  while (true) {
    uint64_t held = counter_bytes(word);
    if (counter.compare_exchange_weak(word, next_counter(word, held > bytes ? held - bytes : 0))) {
      break;
    }
  }
  subtract_saturating(file_->slots[index].reserved[device], bytes);
}

uint64_t TenantLedger::used(int device) const {
  return counter_bytes(file_->counters[device].word.load());
}

uint64_t TenantLedger::own_reserved(int device) const {
  int index = slot_.load(std::memory_order_acquire);
  return index < 0 ? 0 : file_->slots[index].reserved[device].load();
}

int TenantLedger::reclaim_dead_processes() {
  return reclaim(/*claiming=*/false);
}

int TenantLedger::reclaim(bool claiming) {
  const uint64_t me = identity();
  const int mine = slot_.load();
  int freed = 0;
  for (int i = 0; i < kMaxTenantProcesses; ++i) {
    LedgerSlot& slot = file_->slots[i];
    uint64_t owner = slot.owner.load();
    if (owner == 0 || i == mine) continue;
    uint64_t holder = owner & ~kIdentityFlagBit;
    bool gone;
    if (me != 0 && holder == me) {
      // Our own identity on a slot that is not ours: left by this pid before it exec'd (the new
      // image's allocations start from nothing). Only judged while claiming: another thread of
      // this process may be between claiming a slot and publishing it.
      gone = claiming;
    } else {
      gone = !identity_alive(holder);
    }
    if (!gone || me == 0) continue;
    if (!slot.owner.compare_exchange_strong(owner, kIdentityFlagBit | me)) continue;
    for (std::atomic<uint64_t>& bytes : slot.reserved) bytes.store(0);
    slot.owner.store(0);
    ++freed;
  }
  if (freed > 0) {
    for (int device = 0; device < kMaxDevices; ++device) recount(device);
  }
  return freed;
}

void TenantLedger::recount(int device) {
  std::atomic<uint64_t>& counter = file_->counters[device].word;
  for (int attempt = 0; attempt < 8; ++attempt) {
    uint64_t word = counter.load();
    uint64_t total = 0;
    for (const LedgerSlot& slot : file_->slots) total += slot.reserved[device].load();
    if (total > kBytesMask) total = kBytesMask;
    if (counter_bytes(word) == total) return;
    if (counter.compare_exchange_strong(word, next_counter(word, total))) return;
  }
}

void TenantLedger::forget_slot_after_fork() {
  slot_.store(-1);
  identity_.store(0);
  pthread_mutex_init(&claim_lock_, nullptr);
  // The inherited descriptor shares its lock with the parent's: take one of our own, so that
  // this process's remove_if_last_user() cannot mistake the parent's lock for its own.
  if (fd_ >= 0) {
    int own = ::open(path_, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    ::close(fd_);
    fd_ = own >= 0 && flock(own, LOCK_SH) == 0 ? own : -1;
  }
}

}  // namespace gpufrac::memcap
