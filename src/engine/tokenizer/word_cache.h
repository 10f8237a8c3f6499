// The BPE word cache: a bounded map from a pre-tokenized piece (its bytes) to its token ids, so a
// word seen before costs one hash lookup instead of a run of merges. Open addressing in 16 shards,
// each with its own mutex; key bytes and ids of an entry sit together in the shard's arena (one
// cache miss for the slot, one for the entry). A full shard is cleared and starts over, so memory
// stays below ~4 MiB of slots plus kArenaBytesPerShard per shard.
//
// Thread-safety: lookup and insert may be called from many threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

namespace gpufrac::engine {

class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 256;

  // Never 0. Pass the same value to lookup and insert.
  static uint64_t hash(std::string_view word);

  // Appends the ids of `word` to `out` when cached.
  bool lookup(std::string_view word, uint64_t hash, std::vector<int32_t>& out);
  // Precondition: word.size() <= kMaxWordBytes, ids.size() <= kMaxWordBytes.
  void insert(std::string_view word, uint64_t hash, std::span<const int32_t> ids);

 private:
  static constexpr size_t kShards = 16;
  static constexpr size_t kSlotsPerShard = size_t(1) << 14;
  static constexpr size_t kMaxEntriesPerShard = kSlotsPerShard / 2;
  static constexpr size_t kArenaBytesPerShard = size_t(1) << 20;

  struct Slot {
    uint64_t hash;  // 0: empty
    uint32_t offset;  // of the entry in the arena: key bytes, padded to 4, then the ids
    uint16_t key_length;
    uint16_t id_count;
  };
  struct Shard {
    std::mutex mutex;
    std::vector<Slot> slots;  // allocated on first insert
    std::vector<char> arena;
    size_t entries = 0;
  };

  static Shard& shard_of(std::array<Shard, kShards>& shards, uint64_t hash) {
    return shards[hash >> 60];
  }

  std::array<Shard, kShards> shards_;
};

}  // namespace gpufrac::engine
