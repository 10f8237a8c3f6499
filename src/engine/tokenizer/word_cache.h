// The BPE word cache: a bounded map from a pre-tokenized piece (its bytes) to its token ids, so a
// word seen before costs one hash lookup instead of a run of merges. Open addressing in 16 shards,
// each with its own lock: 8-byte slots (a hash tag and an arena offset) point into the shard's
// arena, where an entry holds its key length, id count, key bytes and ids together (one cache
// miss for the slot, one for the entry). A shard's slot table starts small and doubles (up to
// kMaxSlotsPerShard) so the slots of a small vocabulary of words stay in the CPU caches; a full
// shard is cleared and starts over, so memory stays below 16 x (128 KiB of slots + 1 MiB arena).
//
// Thread-safety: lookup, insert and prefetch may be called from many threads at once.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/tokenizer/byte_hash.h"

namespace gpufrac::engine {

class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 256;

  // Never 0 (byte_hash.h's hash_bytes). Pass the same value to lookup and insert.
  static uint64_t hash(std::string_view word) { return hash_bytes(word); }

  // Starts loading the slot where lookup(_, hash, _) will begin (a hint, no lock: call it a few
  // words ahead, so that the slot is in the CPU cache when the lookup comes). The table and mask
  // read here may be from different sizes, or the table already replaced by a larger one, so the
  // address is formed as an integer: a prefetch of any address is harmless, pointer arithmetic
  // past a table would not be.
  void prefetch(uint64_t hash) const {
    const Shard& shard = shards_[hash >> 60];
    const auto slots =
        reinterpret_cast<uintptr_t>(shard.prefetch_slots.load(std::memory_order_relaxed));
    if (slots == 0) return;
    const size_t home = home_of(tag_of(hash), shard.prefetch_mask.load(std::memory_order_relaxed));
    __builtin_prefetch(reinterpret_cast<const void*>(slots + home * sizeof(Slot)));
  }

  // Appends the ids of `word` to `out` when cached.
  bool lookup(std::string_view word, uint64_t hash, std::vector<int32_t>& out);
  // Precondition: word.size() <= kMaxWordBytes, ids.size() <= kMaxWordBytes.
  void insert(std::string_view word, uint64_t hash, std::span<const int32_t> ids);

 private:
  static constexpr size_t kShards = 16;
  static constexpr size_t kMinSlotsPerShard = size_t(1) << 10;
  static constexpr size_t kMaxSlotsPerShard = size_t(1) << 14;
  static constexpr size_t kMaxEntriesPerShard = kMaxSlotsPerShard / 2;  // load factor <= 1/2
  static constexpr size_t kArenaWordsPerShard = (size_t(1) << 20) / sizeof(int32_t);  // 1 MiB

  struct Slot {
    uint32_t tag;     // the hash's upper half, never 0; 0 marks an empty slot
    uint32_t offset;  // of the entry in the arena, in 4-byte words
  };
  // A shard's lock: held for a lookup or an insert (well under a microsecond, a table regrowth
  // aside). Unlocking is a plain release store, where std::mutex spends a second atomic
  // read-modify-write on every call; a waiter spins a hundred reads, then yields its core.
  class SpinLock {
   public:
    void lock() {
      int spins = 0;
      while (held_.exchange(true, std::memory_order_acquire)) {
        while (held_.load(std::memory_order_relaxed)) {
          if (++spins > 100) std::this_thread::yield();
        }
      }
    }
    void unlock() { held_.store(false, std::memory_order_release); }

   private:
    std::atomic<bool> held_{false};
  };

  struct Shard {
    SpinLock lock;
    std::vector<Slot> slots;  // a power of two in size; allocated on first insert
    // slots.data() and size() - 1 for prefetch, published under the lock; a stale pair (the
    // table just grew) only makes a prefetch useless, a prefetch never faults.
    std::atomic<const Slot*> prefetch_slots{nullptr};
    std::atomic<size_t> prefetch_mask{0};
    std::unique_ptr<int32_t[]> arena;  // kArenaWordsPerShard words; entries (word_cache.cpp)
    size_t arena_words = 0;            // in use
    size_t entries = 0;
  };

  static uint32_t tag_of(uint64_t hash) { return hash_tag(hash); }
  // A tag's first slot: from the tag itself, so a table grows without rehashing its keys.
  static size_t home_of(uint32_t tag, size_t mask) { return (tag >> 1) & mask; }
  static void place(Shard& shard, Slot slot);
  static void publish(Shard& shard) {
    shard.prefetch_slots.store(shard.slots.data(), std::memory_order_relaxed);
    shard.prefetch_mask.store(shard.slots.size() - 1, std::memory_order_relaxed);
  }
  static Shard& shard_of(std::array<Shard, kShards>& shards, uint64_t hash) {
    return shards[hash >> 60];
  }

  std::array<Shard, kShards> shards_;
};

}  // namespace gpufrac::engine
