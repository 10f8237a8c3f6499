// Hopper's warpgroup MMA (wgmma, sm_90a) as the flash kernel of flash_hopper.cu uses it: D (fp32,
// 64 x N, in registers) += A (bf16, 64 x 16, in registers or in shared memory) * B (bf16, 16 x N,
// in shared memory), shared-memory operands through matrix descriptors. All 128 threads of a
// warpgroup call each function together.
//
// Register layouts (the same as mma.sync m16n8k16 per warp; warp w of the warpgroup holds rows
// 16w..16w+15, lane = 4 g + t4): A: a[0] = row g, k 2t4..2t4+1; a[1] = row g + 8, same k;
// a[2], a[3] = the same rows at k + 8. D: d[4n + i] is column 8n + 2t4 + (i & 1) of row
// g + 8 (i >> 1).
//
// Operands in shared memory: 128-byte rows, 16-byte chunks swizzled (chunk c of row r stored at
// chunk c ^ (r & 7)), 8-row groups of 1024 bytes, the whole at a 1024-byte aligned address.
// K-major (A[m][k] or B[k][n] with k along the row: 64 k of one m or n per row): the stride
// between 8-row groups (along m or n) is `group_bytes`; a k step of 16 inside the row adds 32
// bytes to the address.
// MN-major (kTransposeB 1, n along the row: 64 n of one k per row): `group_bytes` is the stride
// between 8-row groups (along k) and `block_bytes` the stride between blocks of 64 n.
// Included by .cu files built for sm_90a only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace gpufrac::engine {

// Shared-memory matrix descriptor of a 128-byte swizzled operand at `address` (a shared-window
// address, 16-byte aligned; its swizzle atom 1024-byte aligned).
__device__ __forceinline__ uint64_t wgmma_descriptor(uint32_t address, uint32_t block_bytes,
                                                     uint32_t group_bytes) {
  return uint64_t((address & 0x3ffff) >> 4) | uint64_t((block_bytes >> 4) & 0x3fff) << 16 |
         uint64_t((group_bytes >> 4) & 0x3fff) << 32 | uint64_t(1) << 62;
}

// Orders this thread's register writes before the next wgmma reads them (accumulators, A).
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// Waits until at most kPending committed wgmma groups are in flight.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// Makes this thread's generic-proxy shared-memory writes (cp.async, stores) visible to the
// async proxy through which wgmma reads its B operands.
__device__ __forceinline__ void fence_shared_for_wgmma() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// The 64 fp32 accumulators of an m64n128 wgmma: their PTX operands %0..%63 and the asm outputs
// binding them to d[0..63] (used by the two functions below, undefined after them).
#define GPUFRAC_WGMMA_D64_TEXT \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, " \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, " \
  "%56, %57, %58, %59, %60, %61, %62, %63}"
#define GPUFRAC_WGMMA_D64_OUTPUTS(d) \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), \
  "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), \
  "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), \
  "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), \
  "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), \
  "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), \
  "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), \
  "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// d = a * b (accumulate 0) or d += a * b with A (64 x 16) in registers, N = 128.
template <int kTransposeB>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], const uint32_t (&a)[4],
                                              uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " GPUFRAC_WGMMA_D64_TEXT
      ", {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
      : GPUFRAC_WGMMA_D64_OUTPUTS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate), "n"(kTransposeB));
}

// d = a * b (accumulate 0) or d += a * b with A (64 x 16, K-major) in shared memory, N = 128.
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], uint64_t a, uint64_t b,
                                                  int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " GPUFRAC_WGMMA_D64_TEXT
      ", %64, %65, p, 1, 1, 0, 0;\n}\n"
      : GPUFRAC_WGMMA_D64_OUTPUTS(d)
      : "l"(a), "l"(b), "r"(accumulate));
}

#undef GPUFRAC_WGMMA_D64_TEXT
#undef GPUFRAC_WGMMA_D64_OUTPUTS

}  // namespace gpufrac::engine
