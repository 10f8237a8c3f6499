#include "memcap/tenant_ledger.h"

#include <stdio.h>

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

}  // namespace

struct LedgerSlot {
  std::atomic<uint64_t> owner;  // 0: free; identity; or kIdentityFlagBit | reclaimer's identity
  std::atomic<uint64_t> reserved[kMaxDevices];
};

struct alignas(64) LedgerCounter {
  std::atomic<uint64_t> word;
};

struct LedgerFile {
  StateFileHeader header;
  LedgerCounter counters[kMaxDevices];
  LedgerSlot slots[kMaxTenantProcesses];
};

static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "the ledger needs lock-free 64-bit atomics");

namespace {

bool ledger_in_use(const void* mapping) {
  for (const LedgerSlot& slot : static_cast<const LedgerFile*>(mapping)->slots) {
    if (slot.owner.load() != 0) return true;
  }
  return false;
}

}  // namespace

bool TenantLedger::open(const char* state_dir, const char* tenant, char* error, size_t error_size) {
  close();
  char path[StateFile::kMaxStatePathLength + 1];
  char owners[kMaxTenantLength + 16];
  snprintf(path, sizeof path, "%s/%s.ledger", state_dir, tenant);
  snprintf(owners, sizeof owners, "tenant '%s'", tenant);
  if (!file_.open(state_dir, path, sizeof(LedgerFile), kMagic, "tenant ledger", owners,
                  ledger_in_use, error, error_size)) {
    return false;
  }
  ledger_ = static_cast<LedgerFile*>(file_.mapping());
  return true;
}

void TenantLedger::close() {
  file_.close();
  ledger_ = nullptr;
  slot_.store(-1);
}

void TenantLedger::remove_if_last_user() {
  file_.remove_if_last_user();
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
  if (index >= 0) return &ledger_->slots[index];
  pthread_mutex_lock(&claim_lock_);
  index = slot_.load();
  const uint64_t me = identity();
  if (index < 0 && me != 0) {
    reclaim(/*claiming=*/true);
    for (int i = 0; i < kMaxTenantProcesses && index < 0; ++i) {
      uint64_t expected = 0;
      if (ledger_->slots[i].owner.compare_exchange_strong(expected, me)) index = i;
    }
    if (index >= 0) slot_.store(index, std::memory_order_release);
  }
  pthread_mutex_unlock(&claim_lock_);
  return index >= 0 ? &ledger_->slots[index] : nullptr;
}

TenantLedger::Reservation TenantLedger::reserve(int device, uint64_t bytes, uint64_t cap) {
  if (bytes == 0) return Reservation::kReserved;
  LedgerSlot* slot = own_slot();
  if (slot == nullptr) return Reservation::kNoSlot;
  if (bytes > cap || bytes > kBytesMask) return Reservation::kOverCap;
  std::atomic<uint64_t>& counter = ledger_->counters[device].word;
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
  std::atomic<uint64_t>& counter = ledger_->counters[device].word;
  uint64_t word = counter.load();
  while (true) {
    uint64_t held = counter_bytes(word);
    if (counter.compare_exchange_weak(word, next_counter(word, held > bytes ? held - bytes : 0))) {
      break;
    }
  }
  subtract_saturating(ledger_->slots[index].reserved[device], bytes);
}

uint64_t TenantLedger::used(int device) const {
  return counter_bytes(ledger_->counters[device].word.load());
}

uint64_t TenantLedger::own_reserved(int device) const {
  int index = slot_.load(std::memory_order_acquire);
  return index < 0 ? 0 : ledger_->slots[index].reserved[device].load();
}

int TenantLedger::reclaim_dead_processes() {
  return reclaim(/*claiming=*/false);
}

int TenantLedger::reclaim(bool claiming) {
  const uint64_t me = identity();
  const int mine = slot_.load();
  int freed = 0;
  for (int i = 0; i < kMaxTenantProcesses; ++i) {
    LedgerSlot& slot = ledger_->slots[i];
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
  std::atomic<uint64_t>& counter = ledger_->counters[device].word;
  for (int attempt = 0; attempt < 8; ++attempt) {
    uint64_t word = counter.load();
    uint64_t total = 0;
    for (const LedgerSlot& slot : ledger_->slots) total += slot.reserved[device].load();
    if (total > kBytesMask) total = kBytesMask;
    if (counter_bytes(word) == total) return;
    if (counter.compare_exchange_strong(word, next_counter(word, total))) return;
  }
}

void TenantLedger::forget_slot_after_fork() {
  slot_.store(-1);
  identity_.store(0);
  pthread_mutex_init(&claim_lock_, nullptr);
  file_.reopen_lock_after_fork();
}

}  // namespace gpufrac::memcap
