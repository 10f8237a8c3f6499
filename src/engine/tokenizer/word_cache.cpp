#include "engine/tokenizer/word_cache.h"

#include <algorithm>
#include <cstring>

namespace gpufrac::engine {
namespace {

size_t padded(size_t key_length) { return (key_length + 3) & ~size_t(3); }

}  // namespace

uint64_t WordCache::hash(std::string_view word) {
  const char* p = word.data();
  const size_t n = word.size();
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p + i, n - i);
  h = (h ^ tail) * 0x94D049BB133111EBull;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return h | 1;
}

bool WordCache::lookup(std::string_view word, uint64_t hash, std::vector<int32_t>& out) {
  Shard& shard = shard_of(shards_, hash);
  std::lock_guard lock(shard.mutex);
  if (shard.slots.empty()) return false;
  constexpr size_t kMask = kSlotsPerShard - 1;
  for (size_t i = hash & kMask;; i = (i + 1) & kMask) {
    const Slot& slot = shard.slots[i];
    if (slot.hash == 0) return false;
    if (slot.hash != hash || slot.key_length != word.size()) continue;
    const char* entry = shard.arena.data() + slot.offset;
    if (std::memcmp(entry, word.data(), word.size()) != 0) continue;
    const size_t first = out.size();
    out.resize(first + slot.id_count);
    std::memcpy(out.data() + first, entry + padded(word.size()), slot.id_count * sizeof(int32_t));
    return true;
  }
}

void WordCache::insert(std::string_view word, uint64_t hash, std::span<const int32_t> ids) {
  Shard& shard = shard_of(shards_, hash);
  std::lock_guard lock(shard.mutex);
  const size_t entry_bytes = padded(word.size()) + ids.size_bytes();
  if (shard.slots.empty()) {
    shard.slots.assign(kSlotsPerShard, Slot{0, 0, 0, 0});
    shard.arena.reserve(kArenaBytesPerShard);
  }
  if (shard.entries >= kMaxEntriesPerShard || shard.arena.size() + entry_bytes > kArenaBytesPerShard) {
    std::fill(shard.slots.begin(), shard.slots.end(), Slot{0, 0, 0, 0});
    shard.arena.clear();
    shard.entries = 0;
  }
  constexpr size_t kMask = kSlotsPerShard - 1;
  size_t i = hash & kMask;
  for (;; i = (i + 1) & kMask) {
    const Slot& slot = shard.slots[i];
    if (slot.hash == 0) break;
    if (slot.hash == hash && slot.key_length == word.size() &&
        std::memcmp(shard.arena.data() + slot.offset, word.data(), word.size()) == 0) {
      return;  // another thread inserted it meanwhile
    }
  }
  const size_t offset = shard.arena.size();
  shard.arena.resize(offset + entry_bytes);
  std::memcpy(shard.arena.data() + offset, word.data(), word.size());
  std::memcpy(shard.arena.data() + offset + padded(word.size()), ids.data(), ids.size_bytes());
  shard.slots[i] = Slot{hash, uint32_t(offset), uint16_t(word.size()), uint16_t(ids.size())};
  ++shard.entries;
}

}  // namespace gpufrac::engine
