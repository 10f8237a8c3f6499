#include "engine/cuda/l2_prefetch.h"

#include <algorithm>

#include "engine/cuda/cuda_check.h"

namespace gpufrac::engine {

namespace {

constexpr int kThreads = 128;

constexpr uint64_t kChunkBytes = 32768;  // per prefetch instruction
constexpr int kMaxBlocks = 32;

// Chunk i goes to block i % blocks (so that every block's SM issues a share), thread
// (i / blocks) % kThreads.
__global__ void __launch_bounds__(kThreads) l2_prefetch_kernel(const char* base, uint64_t count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint64_t stride = uint64_t(gridDim.x) * kThreads * kChunkBytes;
  for (uint64_t at = (uint64_t(threadIdx.x) * gridDim.x + blockIdx.x) * kChunkBytes; at < count;
       at += stride) {
    const uint32_t size = uint32_t(min(kChunkBytes, count - at)) & ~15u;
    if (size > 0) {
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(base + at), "r"(size)
                   : "memory");
    }
  }
#endif
}

}  // namespace

void launch_l2_prefetch(const void* bytes, uint64_t count, cudaStream_t stream) {
  if (count < 16) return;
  if (reinterpret_cast<uintptr_t>(bytes) % 16 != 0) {
    throw_cuda_failure("launch_l2_prefetch", __FILE__, __LINE__, "needs a 16-byte aligned start");
  }
  const uint64_t chunks = (count + kChunkBytes - 1) / kChunkBytes;
  const int blocks = int(std::min<uint64_t>(kMaxBlocks, (chunks + 31) / 32));
  l2_prefetch_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const char*>(bytes), count);
  GPUFRAC_LAUNCH_CHECK();
}

}  // namespace gpufrac::engine
