// KvBlockAllocator: the paged KV cache's bookkeeping. A pool of block ids [0, num_blocks); each
// sequence owns a block table (a vector of ids, one block per `block_size` positions) that the
// allocator grows and releases. The memory behind the ids belongs to the ModelRunner
// (allocate_kv_cache); this class only hands out ids, so a block is never shared by two sequences.
//
// Elastic pools: only ids [0, backed_blocks) have memory behind them. When a request for blocks
// finds too few free ones, the allocator asks its backing (set_backing: the engine, which asks
// the runner to map memory) for more, and the backed prefix grows; shrink_backed() gives the tail
// back. Free ids are handed out lowest first, so that blocks in use gather at the start of the
// pool and its tail empties when the load falls.
//
// Also here: how the pool is sized from `--memory-budget BYTES|auto` (never from total memory).
//
// Not thread-safe: the engine loop is its only user. Releasing a block twice throws
// std::logic_error (it would mean two sequences writing one block).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace gpufrac::engine {

class KvBlockAllocator {
 public:
  // backed_blocks < 0: the whole pool is backed.
  KvBlockAllocator(int num_blocks, int block_size, int backed_blocks = -1);

  int num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  int backed_blocks() const { return backed_blocks_; }
  int num_free_blocks() const { return static_cast<int>(free_.size()); }  // backed and free
  int num_used_blocks() const { return backed_blocks_ - num_free_blocks(); }

  // `back(total)` is asked to back the first `total` blocks (total <= num_blocks) and returns how
  // many are backed now (at least as many as before; fewer than asked when memory is short).
  void set_backing(std::function<int(int total)> back) { back_ = std::move(back); }
  // Whether `blocks` ids are free, asking the backing for more first when they are not.
  bool ensure_free(int blocks);
  // One past the highest id in use (0 when none is).
  int used_extent() const;
  // Forgets the backing of ids [blocks, backed_blocks()); every one of them must be free.
  void shrink_backed(int blocks);

  // Blocks needed to hold `num_tokens` positions.
  int blocks_for_tokens(int64_t num_tokens) const {
    return static_cast<int>((num_tokens + block_size_ - 1) / block_size_);
  }
  // Blocks `table` still lacks to cover `num_tokens` positions (0 when it already does).
  int blocks_missing(const std::vector<int32_t>& table, int64_t num_tokens) const;
  // Grows `table` to cover `num_tokens` positions. Returns false, leaving `table` unchanged,
  // when the pool has too few free blocks.
  bool grow(std::vector<int32_t>& table, int64_t num_tokens);
  // Returns every block of `table` to the pool and empties it.
  void release(std::vector<int32_t>& table);

 private:
  int num_blocks_;
  int block_size_;
  int backed_blocks_;
  std::vector<int32_t> free_;     // a min-heap of the backed free ids: the lowest is reused first
  std::vector<uint8_t> in_use_;   // per block id, to catch double frees
  std::function<int(int)> back_;
};

// The KV pool's byte budget from `--memory-budget`: a byte size ("8G", "512MiB", "1073741824"),
// or "auto" = `available_bytes` (free device memory after the weights) minus a margin for
// activations and the allocator's slack. Throws UsageError naming --memory-budget on bad text,
// or when "auto" leaves nothing.
uint64_t resolve_kv_memory_budget(std::string_view spec, uint64_t available_bytes);
// The margin "auto" keeps back: 128 MiB plus 2% of what is available (what the runner allocates
// after the pool is sized, its decode graphs and the sampling extras' buffers, is a few MiB; the
// runner's available_memory_bytes() keeps its own reserve besides).
uint64_t auto_budget_margin(uint64_t available_bytes);
// `--memory-budget elastic`: the most bytes a pool may ever map (it reserves address space, not
// memory); the pool is also never larger than max_num_seqs sequences of max_model_len tokens.
inline constexpr uint64_t kElasticKvCeilingBytes = uint64_t(1) << 40;

// Number of blocks for the pool: what fits in `budget_bytes`, but no more than the engine can
// ever use (max_num_seqs sequences of max_model_len tokens). Throws UsageError naming the flags
// to change when the pool can't hold one sequence of `max_model_len` tokens.
int kv_pool_blocks(uint64_t budget_bytes, uint64_t block_bytes, int block_size, int max_model_len,
                   int max_num_seqs);

}  // namespace gpufrac::engine
