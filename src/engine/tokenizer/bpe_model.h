// Byte-level BPE on raw bytes: a pre-tokenized piece starts as one symbol per byte and the
// lowest-ranked adjacent pair is merged until no pair has a merge (ties: leftmost first), exactly
// as Hugging Face tokenizers and transformers.js do. The vocabulary and merges come in as raw
// bytes and ids (byte_level.h converts tokenizer.json's strings).
//
// Speed: merges come from a MergeTable (Bloom filter, id-pair hash, dense byte-pair table). Pieces
// of up to kShortWordBytes are merged in small arrays on the stack (a branch-free scan over the
// rank of each adjacent pair finds the next merge), longer ones with a tournament tree over the
// pairs. Finished pieces of up to 256 bytes are remembered in a bounded WordCache, so common words
// cost one hash lookup; encode_words hashes each piece once, a few pieces ahead, and prefetches
// its cache slot.
//
// Thread-safety: immutable after construction except the cache, which is internally locked;
// encode_words may be called from many threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/merge_table.h"
#include "engine/tokenizer/vocab_index.h"

namespace gpufrac::engine {

class WordCache;

class BpeModel {
 public:
  // `vocab`: raw bytes -> id, holding every single byte; `merges` in rank order. With
  // `ignore_merges` (Llama 3), a piece that is itself in the vocabulary is taken whole.
  // Throws std::invalid_argument when a single byte is missing from the vocabulary.
  BpeModel(const BytesToId& vocab, const std::vector<BpeMerge>& merges, bool ignore_merges);
  ~BpeModel();

  // Appends the ids of each piece (non-empty), in order.
  void encode_words(std::span<const std::string_view> words, std::vector<int32_t>& out) const;

  // The id of a vocabulary entry given as raw bytes, or -1.
  int32_t id_of_bytes(std::string_view bytes) const { return vocab_.find(bytes); }

 private:
  // Longer pieces take the tournament-tree path. 16, 32 and 64 were within noise of each other on
  // the bench corpus (2026-11-29).
  static constexpr size_t kShortWordBytes = 32;

  static std::array<int32_t, 256> byte_ids_of(const BytesToId& vocab);
  // `hash`: WordCache::hash(word) when the word goes through the cache or ignore_merges_ holds
  // (see encode_words).
  void encode_word(std::string_view word, uint64_t hash, std::vector<int32_t>& out) const;
  // `hash`: as for encode_word.
  void encode_uncached(std::string_view word, uint64_t hash, std::vector<int32_t>& out) const;
  void merge_short(std::string_view word, std::vector<int32_t>& out) const;
  void merge_long(std::string_view word, std::vector<int32_t>& out) const;

  VocabIndex vocab_;
  std::array<int32_t, 256> byte_ids_;
  MergeTable merges_;
  bool ignore_merges_ = false;
  std::unique_ptr<WordCache> cache_;
};

}  // namespace gpufrac::engine
