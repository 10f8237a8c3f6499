#include "engine/tokenizer/bpe_model.h"

#include <algorithm>
#include <stdexcept>

#include "engine/tokenizer/word_cache.h"

namespace gpufrac::engine {

namespace {

constexpr MergeTable::Found kNoMerge = MergeTable::kNoMerge;

// After the symbol at `at` merged with its successor: looks up the pairs (at, after) and
// (before, at) anew (together when both exist; -1: no such neighbour) and hands each to
// `update(position, found)`; the pair at `at` gets kNoMerge when nothing follows it.
template <typename Update>
void rescore_neighbours(const MergeTable& merges, const int32_t* ids, int32_t at,
                               int32_t before, int32_t after, Update update) {
  if (after >= 0 && before >= 0) {
    const auto [with_after, with_before] = merges.find_two(ids[at], ids[after], ids[before], ids[at]);
    update(at, with_after);
    update(before, with_before);
  } else if (after >= 0) {
    update(at, merges.find(ids[at], ids[after]));
  } else {
    update(at, kNoMerge);
    if (before >= 0) update(before, merges.find(ids[before], ids[at]));
  }
}

}  // namespace

std::array<int32_t, 256> BpeModel::byte_ids_of(const BytesToId& vocab) {
  std::array<int32_t, 256> ids{};
  for (int b = 0; b < 256; ++b) {
    const char byte = char(b);
    const auto it = vocab.find(std::string_view(&byte, 1));
    if (it == vocab.end()) {
      throw std::invalid_argument("the vocabulary has no token for byte " + std::to_string(b) +
                                  " (not a byte-level BPE vocabulary)");
    }
    ids[b] = it->second;
  }
  return ids;
}

BpeModel::BpeModel(const BytesToId& vocab, const std::vector<BpeMerge>& merges, bool ignore_merges)
    : vocab_(vocab),
      byte_ids_(byte_ids_of(vocab)),
      merges_(merges, byte_ids_),
      ignore_merges_(ignore_merges),
      cache_(std::make_unique<WordCache>()) {}

BpeModel::~BpeModel() = default;

void BpeModel::encode_words(std::span<const std::string_view> words,
                            std::vector<int32_t>& out) const {
  // A piece's cache slot is usually not in the CPU cache (a cold pass probes all over the
  // table), so each piece's hash is computed kAhead pieces early and its slot prefetched. Pieces
  // too long for the cache are hashed only for the vocabulary lookup of ignore_merges.
  constexpr size_t kAhead = 4;
  uint64_t hashes[kAhead] = {};
  auto start = [&](size_t i) {
    hashes[i % kAhead] = 0;  // no hash: a piece encode_word does not look up by hash
    if (i >= words.size() || words[i].size() < 2) return;
    const bool cached = words[i].size() <= WordCache::kMaxWordBytes;
    if (!cached && !ignore_merges_) return;
    hashes[i % kAhead] = WordCache::hash(words[i]);
    if (cached) cache_->prefetch(hashes[i % kAhead]);
  };
  for (size_t i = 0; i < kAhead; ++i) start(i);
  for (size_t i = 0; i < words.size(); ++i) {
    const uint64_t hash = hashes[i % kAhead];
    start(i + kAhead);
    encode_word(words[i], hash, out);
  }
}

void BpeModel::encode_word(std::string_view word, uint64_t hash, std::vector<int32_t>& out) const {
  if (word.size() == 1) {
    out.push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (word.size() > WordCache::kMaxWordBytes) {
    encode_uncached(word, hash, out);
    return;
  }
  if (cache_->lookup(word, hash, out)) return;
  const size_t first = out.size();
  encode_uncached(word, hash, out);
  cache_->insert(word, hash, std::span<const int32_t>(out).subspan(first));
}

void BpeModel::encode_uncached(std::string_view word, uint64_t hash,
                               std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    if (const int32_t id = vocab_.find(word, hash); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (word.size() <= kShortWordBytes) {
    merge_short(word, out);
  } else {
    merge_long(word, out);
  }
}

// The symbols stay at their first positions, linked by next/prev (a merge keeps the left one);
// pair[i] is rank << 32 | i for merging symbol i with its successor (kNoPair: none, or i is gone),
// so the smallest value is the leftmost earliest merge, found by a branch-free scan over all the
// word's positions; merged[i] is what that merge produces.
void BpeModel::merge_short(std::string_view word, std::vector<int32_t>& out) const {
  constexpr uint64_t kNoPair = UINT64_MAX;
  constexpr uint8_t kNone = UINT8_MAX;
  int32_t ids[kShortWordBytes], merged[kShortWordBytes];
  uint64_t pair[kShortWordBytes];
  uint8_t prev[kShortWordBytes], next[kShortWordBytes];
  const auto* bytes = reinterpret_cast<const unsigned char*>(word.data());
  const size_t n = word.size();
  auto set_pair = [&](size_t i, MergeTable::Found f) {
    pair[i] = f == kNoMerge ? kNoPair : uint64_t(MergeTable::rank_of(f)) << 32 | i;
    merged[i] = MergeTable::merged_of(f);
  };
  for (size_t i = 0; i < n; ++i) {
    ids[i] = byte_ids_[bytes[i]];
    prev[i] = uint8_t(i - 1);  // kNone for the first
    next[i] = uint8_t(i + 1);  // n for the last
  }
  for (size_t i = 0; i + 1 < n; ++i) set_pair(i, merges_.find_bytes(bytes[i], bytes[i + 1]));
  pair[n - 1] = kNoPair;
  for (;;) {
    uint64_t best = pair[0], also = pair[1];  // two chains of compares, pairs at a time
    for (size_t i = 2; i + 1 < n; i += 2) {
      best = std::min(best, pair[i]);
      also = std::min(also, pair[i + 1]);
    }
    best = std::min(best, also);
    if (best == kNoPair) break;
    const size_t at = size_t(best & UINT32_MAX), right = next[at], after = next[right];
    ids[at] = merged[at];
    pair[right] = kNoPair;
    next[at] = uint8_t(after);
    const size_t before = prev[at];
    if (after < n) prev[after] = uint8_t(at);
    rescore_neighbours(merges_, ids, int32_t(at), before == kNone ? -1 : int32_t(before),
                       after < n ? int32_t(after) : -1, set_pair);
  }
  for (size_t i = 0; i < n; i = next[i]) out.push_back(ids[i]);
}

// Symbols form a linked list over positions; a tournament tree over the positions holds, for each
// symbol, rank << 32 | position of merging it with its successor (kNoPair: none), so the root is
// the leftmost lowest-ranked pair and each merge updates three leaves. The per-thread scratch
// is kept for words of up to kKeptScratchBytes; a longer one (a megabyte of text without a
// space) frees what it grew, so no thread holds on to it.
void BpeModel::merge_long(std::string_view word, std::vector<int32_t>& out) const {
  constexpr uint64_t kNoPair = UINT64_MAX;
  constexpr size_t kKeptScratchBytes = 4096;
  struct Scratch {
    std::vector<int32_t> ids, merged, prev, next;
    std::vector<uint64_t> tree;
  };
  thread_local Scratch scratch;
  const auto* bytes = reinterpret_cast<const unsigned char*>(word.data());
  const size_t n = word.size();
  size_t leaves = 1;
  while (leaves < n) leaves *= 2;
  for (auto* v : {&scratch.ids, &scratch.merged, &scratch.prev, &scratch.next}) {
    if (v->size() < n) v->resize(n);
  }
  if (scratch.tree.size() < 2 * leaves) scratch.tree.resize(2 * leaves);
  // Raw pointers: through the thread_local vectors, every access reloaded their data pointers.
  int32_t *ids = scratch.ids.data(), *merged = scratch.merged.data();
  int32_t *prev = scratch.prev.data(), *next = scratch.next.data();
  uint64_t* tree = scratch.tree.data();
  // The leaf of the pair at pos, remembering what it merges into.
  auto leaf = [&](MergeTable::Found f, size_t pos) {
    if (f == kNoMerge) return kNoPair;
    merged[pos] = MergeTable::merged_of(f);
    return uint64_t(MergeTable::rank_of(f)) << 32 | pos;
  };
  for (size_t i = 0; i < n; ++i) {
    ids[i] = byte_ids_[bytes[i]];
    prev[i] = int32_t(i) - 1;
    next[i] = i + 1 < n ? int32_t(i + 1) : -1;
    if (i + 1 < n) tree[leaves + i] = leaf(merges_.find_bytes(bytes[i], bytes[i + 1]), i);
  }
  std::fill(tree + leaves + n - 1, tree + 2 * leaves, kNoPair);
  for (size_t i = leaves - 1; i >= 1; --i) tree[i] = std::min(tree[2 * i], tree[2 * i + 1]);
  auto set = [&](size_t pos, uint64_t value) {
    size_t i = leaves + pos;
    tree[i] = value;
    for (i /= 2; i >= 1; i /= 2) {
      const uint64_t least = std::min(tree[2 * i], tree[2 * i + 1]);
      if (tree[i] == least) break;  // the ancestors are already right
      tree[i] = least;
    }
  };
  while (tree[1] != kNoPair) {
    const int32_t at = int32_t(tree[1] & UINT32_MAX);
    const int32_t right = next[at];
    ids[at] = merged[at];
    next[at] = next[right];
    set(size_t(right), kNoPair);
    const int32_t after = next[at], before = prev[at];
    if (after >= 0) prev[after] = at;
    rescore_neighbours(merges_, ids, at, before, after, [&](int32_t pos, MergeTable::Found f) {
      set(size_t(pos), leaf(f, size_t(pos)));
    });
  }
  for (int32_t i = 0; i >= 0; i = next[i]) out.push_back(ids[i]);
  if (n > kKeptScratchBytes) scratch = Scratch{};
}

}  // namespace gpufrac::engine
