// The CUDA runner's KV pool memory: `segments` runs (one per layer and K or V) of
// `segment_blocks()` blocks of `segment_block_bytes` each, one after another from data().
//
// Whole pools are one cudaMalloc, zeroed. Elastic pools (runner.h, "Elastic KV") reserve the
// address range only (cuMemAddressReserve) and back it in chunks of chunk_blocks() blocks: a
// chunk is the same run of blocks in every segment, one physical allocation per segment
// (cuMemCreate, so the driver's MPS limit and the memcap shim count it; cuMemMap maps a handle
// whole), zeroed when mapped; a chunk is mapped whole or not at all. back() maps
// chunks in order until the asked-for blocks are backed or the device refuses memory (not an
// error: it returns what is backed), and maps nothing when the memory cudaMemGetInfo reports
// free cannot hold all the chunks asked for; release() unmaps and frees the chunks past a block, and the
// caller must make sure no GPU work still uses them. Any other driver failure throws
// RuntimeFailure. The address range never moves, so kernels and captured graphs keep their
// pointers. The driver's VMM entry points are looked up through the runtime
// (cudaGetDriverEntryPointByVersion): no link against libcuda.
//
// Move-only; not thread-safe (the runner's one caller).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace gpufrac::engine {

class KvPoolMemory {
 public:
  KvPoolMemory() = default;
  KvPoolMemory(int blocks, int segments, uint64_t segment_block_bytes, bool elastic, int device,
               cudaStream_t stream);
  ~KvPoolMemory();
  KvPoolMemory(KvPoolMemory&& other) noexcept;
  KvPoolMemory& operator=(KvPoolMemory&& other) noexcept;

  void* data() const { return reinterpret_cast<void*>(base_); }
  int blocks() const { return blocks_; }
  bool elastic() const { return elastic_; }
  int64_t segment_blocks() const { return segment_blocks_; }  // blocks padded to whole chunks
  int chunk_blocks() const { return chunk_blocks_; }
  int backed_blocks() const;
  uint64_t backed_bytes() const;

  int back(int blocks, cudaStream_t stream);
  void release(int keep_blocks);

 private:
  void free_all();
  // Unmaps and frees the last mapped segment run; the first failing driver status.
  CUresult drop_last_segment();
  int64_t mapped_chunks() const { return int64_t(handles_.size()) / segments_; }
  uint64_t chunk_segment_bytes() const { return uint64_t(chunk_blocks_) * segment_block_bytes_; }

  bool elastic_ = false;
  int device_ = 0;
  int blocks_ = 0;
  int segments_ = 0;
  uint64_t segment_block_bytes_ = 0;
  int chunk_blocks_ = 0;
  int64_t segment_blocks_ = 0;
  CUdeviceptr base_ = 0;
  uint64_t reserved_bytes_ = 0;                       // elastic: the address range's size
  // Elastic: one handle per segment of every mapped chunk, chunk by chunk, segment by segment.
  std::vector<CUmemGenericAllocationHandle> handles_;
};

}  // namespace gpufrac::engine
