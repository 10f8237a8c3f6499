#include "engine/tokenizer/word_cache.h"

#include <algorithm>
#include <cstring>

namespace gpufrac::engine {
namespace {

// An entry in a shard's arena (in 4-byte words): this header, the key bytes padded to 4, then the
// ids (so they are copied out as int32_t, without a byte copy into zero-filled space).
struct EntryHeader {
  uint16_t key_length;
  uint16_t id_count;
};

size_t padded(size_t key_length) {
  return (key_length + 3) & ~size_t(3);
}

// The size of an entry in arena words.
size_t entry_words(size_t key_length, size_t id_count) {
  return 1 + padded(key_length) / 4 + id_count;
}

EntryHeader header_at(const int32_t* entry) {
  EntryHeader header;
  std::memcpy(&header, entry, sizeof(header));
  return header;
}

const char* key_at(const int32_t* entry) {
  return reinterpret_cast<const char*>(entry + 1);
}

uint32_t tag_of(uint64_t hash) {
  return uint32_t(hash >> 32) | 1;
}

// A tag's first slot: from the tag itself, so a table grows without rehashing its keys.
size_t home_of(uint32_t tag, size_t mask) {
  return (tag >> 1) & mask;
}

bool same_bytes(const char* a, const char* b, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x, y;
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    if (x != y) return false;
  }
  for (; i < n; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// The entry at `offset` when it holds `word`, else nullptr.
const int32_t* matching_entry(const std::vector<int32_t>& arena, uint32_t offset,
                              std::string_view word) {
  const int32_t* entry = arena.data() + offset;
  if (header_at(entry).key_length != word.size()) return nullptr;
  return same_bytes(key_at(entry), word.data(), word.size()) ? entry : nullptr;
}

uint32_t load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The last n < 8 bytes as a number (n is hashed separately), with fixed-size loads: a
// variable-length memcpy here was a library call per word.
uint64_t tail_bytes(const char* p, size_t n) {
  if (n >= 4) return uint64_t(load32(p)) << 32 | load32(p + n - 4);
  if (n == 0) return 0;
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return uint64_t(b[0]) << 16 | uint64_t(b[n / 2]) << 8 | b[n - 1];
}

uint64_t hash_of_key(std::string_view word) {
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
  h = (h ^ tail_bytes(p + i, n - i)) * 0x94D049BB133111EBull;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return h | 1;
}

}  // namespace

uint64_t WordCache::hash(std::string_view word) {
  return hash_of_key(word);
}

bool WordCache::lookup(std::string_view word, uint64_t hash, std::vector<int32_t>& out) {
  Shard& shard = shard_of(shards_, hash);
  const uint32_t tag = tag_of(hash);
  std::lock_guard guard(shard.lock);
  if (shard.slots.empty()) return false;
  const size_t mask = shard.slots.size() - 1;
  for (size_t i = home_of(tag, mask);; i = (i + 1) & mask) {
    const Slot slot = shard.slots[i];
    if (slot.tag == 0) return false;
    if (slot.tag != tag) continue;
    const int32_t* entry = matching_entry(shard.arena, slot.offset, word);
    if (entry == nullptr) continue;
    const int32_t* ids = entry + 1 + padded(word.size()) / 4;
    out.insert(out.end(), ids, ids + header_at(entry).id_count);
    return true;
  }
}

void WordCache::place(Shard& shard, Slot slot) {
  const size_t mask = shard.slots.size() - 1;
  size_t i = home_of(slot.tag, mask);
  while (shard.slots[i].tag != 0) i = (i + 1) & mask;
  shard.slots[i] = slot;
}

void WordCache::insert(std::string_view word, uint64_t hash, std::span<const int32_t> ids) {
  Shard& shard = shard_of(shards_, hash);
  const uint32_t tag = tag_of(hash);
  std::lock_guard guard(shard.lock);
  const size_t words = entry_words(word.size(), ids.size());
  if (shard.entries >= kMaxEntriesPerShard ||
      (shard.arena.size() + words) * sizeof(int32_t) > kArenaBytesPerShard) {
    shard.slots.clear();
    shard.arena.clear();
    shard.entries = 0;
  }
  if (shard.slots.empty()) {
    shard.slots.assign(kMinSlotsPerShard, Slot{0, 0});
    // All of it at once: the pages are only touched as entries arrive, and growing it by
    // doubling copied it over and over during a first pass over new text.
    shard.arena.reserve(kArenaBytesPerShard / sizeof(int32_t));
  } else if (2 * (shard.entries + 1) > shard.slots.size()) {
    // Double the table and re-place every slot.
    std::vector<Slot> old(2 * shard.slots.size(), Slot{0, 0});
    old.swap(shard.slots);
    for (const Slot slot : old) {
      if (slot.tag != 0) place(shard, slot);
    }
  }
  const size_t mask = shard.slots.size() - 1;
  for (size_t i = home_of(tag, mask); shard.slots[i].tag != 0; i = (i + 1) & mask) {
    if (shard.slots[i].tag == tag && matching_entry(shard.arena, shard.slots[i].offset, word)) {
      return;  // another thread inserted it meanwhile
    }
  }
  const size_t offset = shard.arena.size();
  shard.arena.resize(offset + words);
  int32_t* entry = shard.arena.data() + offset;
  const EntryHeader header{uint16_t(word.size()), uint16_t(ids.size())};
  std::memcpy(entry, &header, sizeof(header));
  std::memcpy(entry + 1, word.data(), word.size());
  std::memcpy(entry + 1 + padded(word.size()) / 4, ids.data(), ids.size_bytes());
  place(shard, Slot{tag, uint32_t(offset)});
  ++shard.entries;
}

}  // namespace gpufrac::engine
