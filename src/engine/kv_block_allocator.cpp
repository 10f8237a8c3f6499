#include "engine/kv_block_allocator.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>

#include "common/error.h"
#include "common/strings.h"

namespace gpufrac::engine {

KvBlockAllocator::KvBlockAllocator(int num_blocks, int block_size, int backed_blocks)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      backed_blocks_(backed_blocks < 0 ? num_blocks : backed_blocks),
      in_use_(std::max(num_blocks, 0), 0) {
  if (num_blocks <= 0 || block_size <= 0 || backed_blocks_ > num_blocks) {
    throw std::invalid_argument(
        "KvBlockAllocator needs num_blocks > 0, block_size > 0 and backed_blocks <= num_blocks");
  }
  free_.reserve(backed_blocks_);
  for (int b = 0; b < backed_blocks_; ++b) free_.push_back(b);  // ascending: already a min-heap
}

bool KvBlockAllocator::ensure_free(int blocks) {
  if (blocks <= num_free_blocks()) return true;
  if (!back_ || backed_blocks_ == num_blocks_) return false;
  int wanted = std::min(num_blocks_, backed_blocks_ + blocks - num_free_blocks());
  int backed = std::min(back_(wanted), num_blocks_);
  for (int b = backed_blocks_; b < backed; ++b) {
    free_.push_back(b);
    std::push_heap(free_.begin(), free_.end(), std::greater<>());
  }
  backed_blocks_ = std::max(backed_blocks_, backed);
  return blocks <= num_free_blocks();
}

int KvBlockAllocator::used_extent() const {
  for (int b = backed_blocks_ - 1; b >= 0; --b) {
    if (in_use_[b]) return b + 1;
  }
  return 0;
}

void KvBlockAllocator::shrink_backed(int blocks) {
  if (blocks < used_extent() || blocks > backed_blocks_) {
    throw std::logic_error("shrink_backed(" + std::to_string(blocks) +
                           ") would drop blocks in use or add blocks");
  }
  std::erase_if(free_, [&](int32_t b) { return b >= blocks; });
  std::make_heap(free_.begin(), free_.end(), std::greater<>());
  backed_blocks_ = blocks;
}

int KvBlockAllocator::blocks_missing(const std::vector<int32_t>& table, int64_t num_tokens) const {
  return std::max(0, blocks_for_tokens(num_tokens) - static_cast<int>(table.size()));
}

bool KvBlockAllocator::grow(std::vector<int32_t>& table, int64_t num_tokens) {
  int missing = blocks_missing(table, num_tokens);
  if (!ensure_free(missing)) return false;
  for (int i = 0; i < missing; ++i) {
    std::pop_heap(free_.begin(), free_.end(), std::greater<>());
    int32_t block = free_.back();
    free_.pop_back();
    in_use_[block] = 1;
    table.push_back(block);
  }
  return true;
}

void KvBlockAllocator::release(std::vector<int32_t>& table) {
  for (int32_t block : table) {
    if (block < 0 || block >= num_blocks_ || !in_use_[block]) {
      throw std::logic_error("KV block " + std::to_string(block) + " released but not in use");
    }
    in_use_[block] = 0;
    free_.push_back(block);
    std::push_heap(free_.begin(), free_.end(), std::greater<>());
  }
  table.clear();
}

uint64_t auto_budget_margin(uint64_t available_bytes) {
  return (uint64_t(128) << 20) + available_bytes / 50;
}

uint64_t resolve_kv_memory_budget(std::string_view spec, uint64_t available_bytes) {
  if (spec != "auto") return parse_bytes(spec, "--memory-budget");
  uint64_t margin = auto_budget_margin(available_bytes);
  if (available_bytes <= margin) {
    throw UsageError("--memory-budget auto: the device has only " + format_bytes(available_bytes) +
                     " free after the weights, less than the " + format_bytes(margin) +
                     " margin; free memory or give --memory-budget BYTES");
  }
  return available_bytes - margin;
}

int kv_pool_blocks(uint64_t budget_bytes, uint64_t block_bytes, int block_size, int max_model_len,
                   int max_num_seqs) {
  if (block_bytes == 0) throw std::invalid_argument("kv_pool_blocks: block_bytes is 0");
  uint64_t per_sequence = (uint64_t(max_model_len) + block_size - 1) / block_size;
  uint64_t useful = per_sequence * uint64_t(max_num_seqs);
  uint64_t fits = budget_bytes / block_bytes;
  if (fits < per_sequence) {
    throw UsageError("--memory-budget " + format_bytes(budget_bytes) + " holds " +
                     std::to_string(fits) + " KV blocks of " + std::to_string(block_size) +
                     " tokens (" + format_bytes(block_bytes) + " each), but one sequence of " +
                     "--max-model-len " + std::to_string(max_model_len) + " needs " +
                     std::to_string(per_sequence) +
                     ": raise --memory-budget or lower --max-model-len");
  }
  uint64_t blocks = std::min({fits, useful, uint64_t(INT32_MAX)});
  return static_cast<int>(blocks);
}

}  // namespace gpufrac::engine
