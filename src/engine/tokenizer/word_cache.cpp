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

uint32_t load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

uint64_t load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// a[0, n) == b[0, n), with fixed-size loads (the last one may overlap the one before).
bool same_bytes(const char* a, const char* b, size_t n) {
  if (n >= 8) {
    for (size_t i = 0; i + 8 < n; i += 8) {
      if (load64(a + i) != load64(b + i)) return false;
    }
    return load64(a + n - 8) == load64(b + n - 8);
  }
  if (n >= 4) return load32(a) == load32(b) && load32(a + n - 4) == load32(b + n - 4);
  return n == 0 || (a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1]);
}

// The entry at `offset` when it holds `word`, else nullptr.
const int32_t* matching_entry(const int32_t* arena, uint32_t offset, std::string_view word) {
  const int32_t* entry = arena + offset;
  if (header_at(entry).key_length != word.size()) return nullptr;
  return same_bytes(key_at(entry), word.data(), word.size()) ? entry : nullptr;
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
    h = (h ^ load64(p + i)) * 0xBF58476D1CE4E5B9ull;
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
    const int32_t* entry = matching_entry(shard.arena.get(), slot.offset, word);
    if (entry == nullptr) continue;
    const int32_t* ids = entry + 1 + padded(word.size()) / 4;
    // Usually one to three ids: a loop, where a range insert called memmove.
    for (size_t k = 0, count = header_at(entry).id_count; k < count; ++k) out.push_back(ids[k]);
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
  if (shard.entries >= kMaxEntriesPerShard || shard.arena_words + words > kArenaWordsPerShard) {
    shard.slots.clear();  // keeps its memory (a published pointer stays valid until a growth)
    shard.arena_words = 0;
    shard.entries = 0;
  }
  if (shard.slots.empty()) {
    shard.slots.assign(kMinSlotsPerShard, Slot{0, 0});
    // All of it at once and uninitialized: the pages are only touched as entries arrive.
    if (!shard.arena) shard.arena.reset(new int32_t[kArenaWordsPerShard]);
    publish(shard);
  } else if (2 * (shard.entries + 1) > shard.slots.size()) {
    // Double the table and re-place every slot.
    std::vector<Slot> old(2 * shard.slots.size(), Slot{0, 0});
    old.swap(shard.slots);
    for (const Slot slot : old) {
      if (slot.tag != 0) place(shard, slot);
    }
    publish(shard);
  }
  const size_t mask = shard.slots.size() - 1;
  for (size_t i = home_of(tag, mask); shard.slots[i].tag != 0; i = (i + 1) & mask) {
    if (shard.slots[i].tag == tag &&
        matching_entry(shard.arena.get(), shard.slots[i].offset, word)) {
      return;  // another thread inserted it meanwhile
    }
  }
  const size_t offset = shard.arena_words;
  shard.arena_words += words;
  int32_t* entry = shard.arena.get() + offset;
  const EntryHeader header{uint16_t(word.size()), uint16_t(ids.size())};
  std::memcpy(entry, &header, sizeof(header));
  std::memcpy(entry + 1, word.data(), word.size());
  std::memcpy(entry + 1 + padded(word.size()) / 4, ids.data(), ids.size_bytes());
  place(shard, Slot{tag, uint32_t(offset)});
  ++shard.entries;
}

}  // namespace gpufrac::engine
