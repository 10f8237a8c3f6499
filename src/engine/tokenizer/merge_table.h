// BPE merges by token-id pair, laid out for the merge loop's lookups (BpeModel), most of which
// (about 3 in 4 on the test corpus) find no merge:
//   - a Bloom filter of the pairs (two bits in one 64-bit word, about 14 bits per merge: 256 KiB
//     for Qwen3's 151k merges, 512 KiB for Llama 3's 280k; ~2% false positives) answers most
//     "no merge" lookups from L2;
//   - an open-addressing table of 16-byte slots (the pair, and the merge's rank and merged id
//     together, so an applied merge needs no second lookup), load factor <= 5/8: 4 MiB for
//     Qwen3, 8 MiB for Llama 3;
//   - a dense 256 x 256 table of byte-pair merges (512 KiB) for a piece's first round of lookups,
//     when every symbol is still one byte.
// (8-byte slots packing ids and rank, with the merged id in a second array, measured the same.)
//
// A pair listed twice takes its last rank, as in Hugging Face tokenizers and transformers.js.
// Token ids are non-negative int32 (the loader checks).
//
// Thread-safety: immutable after construction.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace gpufrac::engine {

struct BpeMerge {
  int32_t left, right, merged;  // token ids; the merge's rank is its index in the list
};

class MergeTable {
 public:
  // A merge found for a pair: rank << 32 | merged id, so the smaller value is the earlier merge.
  using Found = uint64_t;
  static constexpr Found kNoMerge = UINT64_MAX;
  static uint32_t rank_of(Found f) { return uint32_t(f >> 32); }
  static int32_t merged_of(Found f) { return int32_t(uint32_t(f)); }

  MergeTable(const std::vector<BpeMerge>& merges, const std::array<int32_t, 256>& byte_ids) {
    if (merges.size() >= UINT32_MAX) throw std::invalid_argument("too many merges");
    size_t capacity = 16;
    while (capacity * 5 / 8 < merges.size()) capacity *= 2;  // load factor <= 5/8
    slots_.assign(capacity, Slot{kEmpty, 0});
    shift_ = 64 - __builtin_ctzll(capacity);
    size_t filter_words = 16;
    while (filter_words * 8 < merges.size()) filter_words *= 2;  // >= 8 bits per merge
    filter_.assign(filter_words, 0);
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const BpeMerge& m = merges[rank];
      const uint64_t key = pair_key(m.left, m.right);
      const uint64_t hash = mix(key);
      filter_[hash & (filter_.size() - 1)] |= filter_bits(hash);
      for (size_t i = hash >> shift_;; i = (i + 1) & (slots_.size() - 1)) {
        if (slots_[i].key == kEmpty || slots_[i].key == key) {
          slots_[i] = Slot{key, uint64_t(rank) << 32 | uint32_t(m.merged)};
          break;
        }
      }
    }
    byte_pairs_.resize(256 * 256);
    for (int a = 0; a < 256; ++a) {
      for (int b = 0; b < 256; ++b) byte_pairs_[a << 8 | b] = find(byte_ids[a], byte_ids[b]);
    }
  }

  // The merge of (left, right), or kNoMerge.
  Found find(int32_t left, int32_t right) const {
    const uint64_t key = pair_key(left, right);
    const uint64_t hash = mix(key);
    return may_hold(hash) ? probe(key, hash) : kNoMerge;
  }

  // find(a_left, a_right) and find(b_left, b_right) with their memory reads overlapped: the two
  // filter words are read before either is tested, and both slots are prefetched before either is
  // probed (a merge's two new neighbour pairs; each read is often a cache miss).
  std::array<Found, 2> find_two(int32_t a_left, int32_t a_right, int32_t b_left,
                                int32_t b_right) const {
    const uint64_t a_key = pair_key(a_left, a_right), b_key = pair_key(b_left, b_right);
    const uint64_t a_hash = mix(a_key), b_hash = mix(b_key);
    const bool a_may = may_hold(a_hash), b_may = may_hold(b_hash);
    if (a_may) __builtin_prefetch(&slots_[a_hash >> shift_]);
    if (b_may) __builtin_prefetch(&slots_[b_hash >> shift_]);
    return {a_may ? probe(a_key, a_hash) : kNoMerge, b_may ? probe(b_key, b_hash) : kNoMerge};
  }

  // find(byte_ids[a], byte_ids[b]) without hashing.
  Found find_bytes(unsigned char a, unsigned char b) const {
    return byte_pairs_[unsigned(a) << 8 | b];
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);  // ids are below 2^31
  struct Slot {
    uint64_t key;  // left << 32 | right
    Found found;
  };

  static uint64_t pair_key(int32_t left, int32_t right) {
    return uint64_t(uint32_t(left)) << 32 | uint32_t(right);
  }
  // Slot index: the top bits; filter word: the low bits; the two filter bits: bits 32-43.
  static uint64_t mix(uint64_t key) {
    key = (key ^ (key >> 31)) * 0x7FB5D329728EA185ull;
    key = (key ^ (key >> 27)) * 0x81DADEF4BC2DD44Dull;
    return key ^ (key >> 33);
  }
  static uint64_t filter_bits(uint64_t hash) {
    return uint64_t(1) << ((hash >> 32) & 63) | uint64_t(1) << ((hash >> 38) & 63);
  }
  // The Bloom filter's answer: false means certainly no merge.
  bool may_hold(uint64_t hash) const {
    const uint64_t bits = filter_bits(hash);
    return (filter_[hash & (filter_.size() - 1)] & bits) == bits;
  }
  Found probe(uint64_t key, uint64_t hash) const {
    for (size_t i = hash >> shift_;; i = (i + 1) & (slots_.size() - 1)) {
      const Slot& slot = slots_[i];
      if (slot.key == key) return slot.found;
      if (slot.key == kEmpty) return kNoMerge;
    }
  }

  std::vector<Slot> slots_;        // a power of two in size
  int shift_ = 60;                 // 64 - log2(slots_.size())
  std::vector<uint64_t> filter_;   // Bloom filter words; a power of two in size
  std::vector<Found> byte_pairs_;  // [a << 8 | b]
};

}  // namespace gpufrac::engine
