// A vocabulary's raw token bytes -> id, flat for lookups of whole pieces (Llama 3's ignore_merges
// checks every new piece): open addressing over 8-byte slots (a hash tag and an arena offset),
// each entry's id, length and bytes together in one arena, so a miss usually costs one slot read
// and a hit one slot and one entry. A std::unordered_map of strings cost a bucket, a node and a
// string per lookup.
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/byte_hash.h"

namespace gpufrac::engine {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using BytesToId = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class VocabIndex {
 public:
  explicit VocabIndex(const BytesToId& vocab) {
    size_t capacity = 16;
    while (capacity < 2 * vocab.size()) capacity *= 2;  // load factor <= 1/2
    slots_.assign(capacity, Slot{0, 0});
    for (const auto& [bytes, id] : vocab) {
      const uint64_t hash = hash_bytes(bytes);
      const uint32_t offset = uint32_t(arena_.size());
      const EntryHeader header{id, uint32_t(bytes.size())};
      arena_.append(reinterpret_cast<const char*>(&header), sizeof(header));
      arena_.append(bytes);
      arena_.resize((arena_.size() + 3) & ~size_t(3));
      size_t i = hash & (slots_.size() - 1);
      while (slots_[i].tag != 0) i = (i + 1) & (slots_.size() - 1);
      slots_[i] = Slot{hash_tag(hash), offset};
    }
  }

  // The id of `bytes`, or -1.
  int32_t find(std::string_view bytes) const { return find(bytes, hash_bytes(bytes)); }
  // The same with `hash` = hash_bytes(bytes), for a caller that has it already.
  int32_t find(std::string_view bytes, uint64_t hash) const {
    const uint32_t tag = hash_tag(hash);
    for (size_t i = hash & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      const Slot slot = slots_[i];
      if (slot.tag == 0) return -1;
      if (slot.tag != tag) continue;
      EntryHeader header;
      std::memcpy(&header, arena_.data() + slot.offset, sizeof(header));
      if (header.length == bytes.size() &&
          same_bytes(arena_.data() + slot.offset + sizeof(header), bytes.data(), bytes.size())) {
        return header.id;
      }
    }
  }

 private:
  struct Slot {
    uint32_t tag;  // the hash's upper half, never 0; 0 marks an empty slot
    uint32_t offset;
  };
  struct EntryHeader {
    int32_t id;
    uint32_t length;
  };
  std::vector<Slot> slots_;  // a power of two in size
  std::string arena_;        // entries: EntryHeader, then the bytes padded to 4
};

}  // namespace gpufrac::engine
