// Device primitives shared by the tensor-core kernels (attention_fast.cu, gemv_mma.cu): 16-byte
// asynchronous copies from global into shared memory (cp.async, sm_80 and later) and the bf16
// m16n8k16 tensor-core MMA with fp32 accumulators. Included by .cu files only.
#pragma once

#include <cstdint>

namespace gpufrac::engine {

// Copies 16 bytes from global `src` to shared `dst` without staging in registers (not kept in
// L1). Part of the thread's next committed group.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src) {
  const unsigned shared = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared), "l"(src));
}

// cp_async_16 reading `bytes` (0 or 16) of `src` and zero-filling the rest of the 16: with 0
// nothing is read (src must still be a valid address).
__device__ __forceinline__ void cp_async_16_or_zero(void* dst, const void* src, int bytes) {
  const unsigned shared = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared), "l"(src),
               "r"(bytes));
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most `kPending` committed groups of this thread are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// d += a (16x16 bf16, row-major fragment) * b (16x8 bf16, column fragment), fp32 accumulators.
// Fragment layout (PTX mma m16n8k16): lane = 4 g + t4; a holds rows g and g + 8 at columns
// 2 t4, 2 t4 + 1 (a[0], a[1]) and 2 t4 + 8, 2 t4 + 9 (a[2], a[3]); b holds column g at rows
// 2 t4, 2 t4 + 1 (b0) and 2 t4 + 8, 2 t4 + 9 (b1); d holds rows g, g + 8 at columns 2 t4, 2 t4 + 1.
__device__ __forceinline__ void mma_bf16_16816(float d[4], const uint32_t a[4], uint32_t b0,
                                               uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace gpufrac::engine
