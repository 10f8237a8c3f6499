// How an elastic KV pool (runner.h) is cut into chunks. Both runners lay the pool out as
// `segments` (one per layer and K or V), each a run of blocks; a chunk is the same run of blocks
// in every segment, and is backed or given back whole. A chunk's run in one segment is a whole
// number of the memory's mapping granularity (CUDA VMM's, or a multiple of the host page), so
// each segment is padded to whole chunks. Pure functions.
#pragma once

#include <cstdint>
#include <numeric>

namespace gpufrac::engine {

// The fewest blocks whose bytes in one segment are a multiple of `granularity`.
inline int kv_chunk_blocks(uint64_t segment_block_bytes, uint64_t granularity) {
  return static_cast<int>(granularity / std::gcd(granularity, segment_block_bytes));
}

// `blocks` rounded up to whole chunks of `chunk_blocks`.
inline int64_t kv_round_up_to_chunks(int64_t blocks, int chunk_blocks) {
  return (blocks + chunk_blocks - 1) / chunk_blocks * chunk_blocks;
}

}  // namespace gpufrac::engine
