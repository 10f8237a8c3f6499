#include "engine/kv_block_allocator.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/error.h"
#include "common/strings.h"

namespace gpufrac::engine {

KvBlockAllocator::KvBlockAllocator(int num_blocks, int block_size)
    : num_blocks_(num_blocks), block_size_(block_size), in_use_(std::max(num_blocks, 0), 0) {
  if (num_blocks <= 0 || block_size <= 0) {
    throw std::invalid_argument("KvBlockAllocator needs num_blocks > 0 and block_size > 0");
  }
  free_.reserve(num_blocks);
  // Pushed in reverse so that a fresh pool hands out 0, 1, 2, ... (readable in tests and logs).
  for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int KvBlockAllocator::blocks_missing(const std::vector<int32_t>& table, int64_t num_tokens) const {
  return std::max(0, blocks_for_tokens(num_tokens) - static_cast<int>(table.size()));
}

bool KvBlockAllocator::grow(std::vector<int32_t>& table, int64_t num_tokens) {
  int missing = blocks_missing(table, num_tokens);
  if (missing > num_free_blocks()) return false;
  for (int i = 0; i < missing; ++i) {
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
  }
  table.clear();
}

uint64_t auto_budget_margin(uint64_t available_bytes) {
  return (uint64_t(512) << 20) + available_bytes / 20;
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
