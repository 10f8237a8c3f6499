// BPE merge ranks by token-id pair, laid out for the merge loop's lookups (BpeModel), most of which
// (about 3 in 4 on the test corpus) find no merge:
//   - a Bloom filter of the pairs (two bits in one 64-bit word, about 14 bits per merge: 256 KiB
//     for Qwen3's 151k merges, 512 KiB for Llama 3's 280k; ~2% false positives) answers most
//     "no merge" lookups from L2;
//   - an open-addressing table of 8-byte slots, each packing (left id, right id, rank), so one
//     compare checks a slot (2 MiB for Qwen3, 4 MiB for Llama 3, load factor <= 5/8);
//   - a dense 256 x 256 table of byte-pair ranks (256 KiB) for a piece's first round of lookups,
//     when every symbol is still one byte.
// The merged id is looked up by rank, only for the merge that is applied.
//
// Limits: token ids in merges and the byte ids must be below kIdLimit (2^20 - 1) and there may be
// at most kRankLimit (2^24) merges; the constructor throws std::invalid_argument otherwise. A pair
// listed twice takes its last rank, as in Hugging Face tokenizers and transformers.js.
//
// Thread-safety: immutable after construction.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpufrac::engine {

struct BpeMerge {
  int32_t left, right, merged;  // token ids; the merge's rank is its index in the list
};

class MergeTable {
 public:
  static constexpr uint32_t kNoMerge = UINT32_MAX;
  static constexpr int32_t kIdLimit = (1 << 20) - 1;
  static constexpr size_t kRankLimit = size_t(1) << 24;

  MergeTable(const std::vector<BpeMerge>& merges, const std::array<int32_t, 256>& byte_ids) {
    if (merges.size() > kRankLimit) {
      throw std::invalid_argument(std::to_string(merges.size()) + " merges (at most " +
                                  std::to_string(kRankLimit) + " are supported)");
    }
    for (const int32_t id : byte_ids) check_id(id);
    size_t capacity = 16;
    while (capacity * 5 / 8 < merges.size()) capacity *= 2;  // load factor <= 5/8
    slots_.assign(capacity, kEmpty);
    shift_ = 64 - __builtin_ctzll(capacity);
    size_t filter_words = 16;
    while (filter_words * 8 < merges.size()) filter_words *= 2;  // >= 8 bits per merge
    filter_.assign(filter_words, 0);
    merged_.resize(merges.size());
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const BpeMerge& m = merges[rank];
      check_id(m.left);
      check_id(m.right);
      merged_[rank] = m.merged;
      const uint64_t key = pair_key(m.left, m.right);
      const uint64_t hash = mix(key);
      filter_[hash & (filter_.size() - 1)] |= filter_bits(hash);
      for (size_t i = hash >> shift_;; i = (i + 1) & (slots_.size() - 1)) {
        if (slots_[i] == kEmpty || slots_[i] >> kRankBits == key) {
          slots_[i] = key << kRankBits | rank;
          break;
        }
      }
    }
    byte_pair_ranks_.resize(256 * 256);
    for (int a = 0; a < 256; ++a) {
      for (int b = 0; b < 256; ++b) byte_pair_ranks_[a << 8 | b] = rank(byte_ids[a], byte_ids[b]);
    }
  }

  // The rank of merging (left, right), or kNoMerge. Precondition: both ids came from merges or
  // byte ids (so they are below kIdLimit).
  uint32_t rank(int32_t left, int32_t right) const {
    const uint64_t key = pair_key(left, right);
    const uint64_t hash = mix(key);
    const uint64_t bits = filter_bits(hash);
    if ((filter_[hash & (filter_.size() - 1)] & bits) != bits) return kNoMerge;
    for (size_t i = hash >> shift_;; i = (i + 1) & (slots_.size() - 1)) {
      const uint64_t slot = slots_[i];
      if (slot >> kRankBits == key) return uint32_t(slot & kRankMask);
      if (slot == kEmpty) return kNoMerge;
    }
  }

  // rank(byte_ids[a], byte_ids[b]) without hashing.
  uint32_t byte_pair_rank(unsigned char a, unsigned char b) const {
    return byte_pair_ranks_[unsigned(a) << 8 | b];
  }

  // The id a merge produces. Precondition: rank < number of merges.
  int32_t merged(uint32_t rank) const { return merged_[rank]; }

 private:
  static constexpr int kRankBits = 24;
  static constexpr uint64_t kRankMask = (uint64_t(1) << kRankBits) - 1;
  // Ids kIdLimit, kIdLimit with rank kRankMask: no real slot is all ones.
  static constexpr uint64_t kEmpty = ~uint64_t(0);

  static void check_id(int32_t id) {
    if (id < 0 || id >= kIdLimit) {
      throw std::invalid_argument("token id " + std::to_string(id) +
                                  " in a merge is out of range (ids up to " +
                                  std::to_string(kIdLimit - 1) + " are supported)");
    }
  }
  static uint64_t pair_key(int32_t left, int32_t right) {
    return uint64_t(uint32_t(left)) << 20 | uint32_t(right);
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

  std::vector<uint64_t> slots_;            // key << kRankBits | rank; a power of two in size
  int shift_ = 60;                         // 64 - log2(slots_.size())
  std::vector<uint64_t> filter_;           // Bloom filter words; a power of two in size
  std::vector<int32_t> merged_;            // by rank
  std::vector<uint32_t> byte_pair_ranks_;  // [a << 8 | b]
};

}  // namespace gpufrac::engine
