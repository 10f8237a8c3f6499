#include "engine/tokenizer/word_cache.h"

#include <algorithm>
#include <cstring>

#include "engine/tokenizer/byte_hash.h"

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

// The entry at `offset` when it holds `word`, else nullptr.
const int32_t* matching_entry(const int32_t* arena, uint32_t offset, std::string_view word) {
  const int32_t* entry = arena + offset;
  if (header_at(entry).key_length != word.size()) return nullptr;
  return same_bytes(key_at(entry), word.data(), word.size()) ? entry : nullptr;
}

}  // namespace

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
