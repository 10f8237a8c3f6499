#include "engine/tokenizer/bpe_model.h"

#include <algorithm>
#include <stdexcept>

#include "engine/tokenizer/word_cache.h"

namespace gpufrac::engine {

namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return ((uint64_t(uint32_t(left)) << 32) | uint32_t(right)) + 1;
}

uint64_t mix(uint64_t key) {
  return (key * 0x9E3779B97F4A7C15ull) ^ (key >> 29);
}

struct Symbol {
  int32_t id;  // -1 once merged into its left neighbour
  int32_t prev, next;
};

struct Candidate {
  uint32_t rank;
  int32_t pos;  // index of the left symbol
  int32_t merged;
  // std heap functions build a max-heap: "less" means later (higher rank, then further right).
  bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

BpeModel::BpeModel(BytesToId vocab, const std::vector<BpeMerge>& merges, bool ignore_merges)
    : vocab_(std::move(vocab)),
      ignore_merges_(ignore_merges),
      cache_(std::make_unique<WordCache>()) {
  for (int b = 0; b < 256; ++b) {
    const int32_t id = id_of_bytes(std::string(1, char(b)));
    if (id < 0) {
      throw std::invalid_argument("the vocabulary has no token for byte " + std::to_string(b) +
                                  " (not a byte-level BPE vocabulary)");
    }
    byte_ids_[b] = id;
  }
  size_t capacity = 16;
  while (capacity < merges.size() * 2) capacity *= 2;
  merge_slots_.assign(capacity, MergeSlot{0, 0, 0});
  merge_mask_ = capacity - 1;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const BpeMerge& m = merges[rank];
    const uint64_t key = pair_key(m.left, m.right);
    for (uint64_t i = mix(key) & merge_mask_;; i = (i + 1) & merge_mask_) {
      MergeSlot& slot = merge_slots_[i];
      // A repeated pair takes its last rank, as in Hugging Face tokenizers and transformers.js.
      if (slot.key == key || slot.key == 0) {
        slot = MergeSlot{key, uint32_t(rank), m.merged};
        break;
      }
    }
  }
}

BpeModel::~BpeModel() = default;

int32_t BpeModel::id_of_bytes(std::string_view bytes) const {
  auto it = vocab_.find(bytes);
  return it == vocab_.end() ? -1 : it->second;
}

const BpeModel::MergeSlot* BpeModel::find_merge(int32_t left, int32_t right) const {
  const uint64_t key = pair_key(left, right);
  for (uint64_t i = mix(key) & merge_mask_;; i = (i + 1) & merge_mask_) {
    const MergeSlot& slot = merge_slots_[i];
    if (slot.key == key) return &slot;
    if (slot.key == 0) return nullptr;
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() == 1) {
    out.push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (word.size() > WordCache::kMaxWordBytes) {
    encode_uncached(word, out);
    return;
  }
  const uint64_t hash = WordCache::hash(word);
  if (cache_->lookup(word, hash, out)) return;
  const size_t first = out.size();
  encode_uncached(word, out);
  cache_->insert(word, hash, std::span<const int32_t>(out).subspan(first));
}

void BpeModel::encode_uncached(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    if (const int32_t id = id_of_bytes(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  merge_symbols(word, out);
}

void BpeModel::merge_symbols(std::string_view word, std::vector<int32_t>& out) const {
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;
  const int32_t n = int32_t(word.size());
  symbols.resize(n);
  heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] =
        Symbol{byte_ids_[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1};
  }
  auto push_candidate = [&](int32_t pos) {
    if (pos < 0 || symbols[pos].next < 0) return;
    if (const MergeSlot* m = find_merge(symbols[pos].id, symbols[symbols[pos].next].id)) {
      heap.push_back(Candidate{m->rank, pos, m->merged});
      std::push_heap(heap.begin(), heap.end());
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_candidate(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = symbols[c.pos];
    if (left.id < 0 || left.next < 0) continue;
    // Stale when either side changed since the candidate was pushed: the merged token would differ.
    const MergeSlot* current = find_merge(left.id, symbols[left.next].id);
    if (current == nullptr || current->merged != c.merged) continue;
    Symbol& right = symbols[left.next];
    left.id = c.merged;
    right.id = -1;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = c.pos;
    push_candidate(left.prev);
    push_candidate(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace gpufrac::engine
