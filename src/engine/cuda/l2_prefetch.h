// Warms the L2 cache with bytes a step reads soon (the next linear layer's weights) while the
// kernels between two linear layers (RoPE, attention, add + RMSNorm) leave the memory bus mostly
// idle: one block of 128 threads issues bulk L2 prefetches of 32 KiB each
// (cp.async.bulk.prefetch.L2, sm_90 and later; before sm_90 the kernel does nothing) and exits
// without waiting for the data. A hint: no kernel depends on it for correctness, so a prefetch
// evicted before it is read costs only bus time.
//
// `bytes` must be 16-byte aligned; a tail of `count` past a multiple of 16 is not prefetched.
// Asynchronous on `stream`, legal inside CUDA graph capture. The caller launches it on a stream
// of its own, forked from and joined back to the step's stream, so it overlaps the step's
// kernels instead of sitting between them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace gpufrac::engine {

void launch_l2_prefetch(const void* bytes, uint64_t count, cudaStream_t stream);

}  // namespace gpufrac::engine
