#include "engine/cuda/gemv.h"

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device_math.cuh"

namespace gpufrac::engine {

namespace {

constexpr int kWarps = 4;   // per block; one output feature per warp
constexpr int kUnroll = 4;  // 16-byte weight loads in flight per lane

// Streaming 16-byte load: read-only, not allocated in L1 (each weight is read once per step).
__device__ __forceinline__ uint4 load_streaming(const uint4* src) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(src));
  return r;
}

__device__ __forceinline__ float dot8(const uint4& a, const uint4& b) {
  const __nv_bfloat162* a2 = reinterpret_cast<const __nv_bfloat162*>(&a);
  const __nv_bfloat162* b2 = reinterpret_cast<const __nv_bfloat162*>(&b);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 fa = __bfloat1622float2(a2[i]), fb = __bfloat1622float2(b2[i]);
    sum = fmaf(fa.x, fb.x, sum);
    sum = fmaf(fa.y, fb.y, sum);
  }
  return sum;
}

template <int kM>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(const bf16* x, const bf16* w, void* y,
                                                           bool y_bf16, int n, int k) {
  const int lane = threadIdx.x & 31;
  const int feature = blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (feature >= n) return;
  const int chunks = k / 8;
  const uint4* w_row = reinterpret_cast<const uint4*>(w + int64_t(feature) * k);
  const uint4* x_rows = reinterpret_cast<const uint4*>(x);
  float acc[kM];
#pragma unroll
  for (int m = 0; m < kM; ++m) acc[m] = 0.0f;
  for (int c0 = lane; c0 < chunks; c0 += 32 * kUnroll) {
    uint4 wv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      int c = c0 + u * 32;
      wv[u] = c < chunks ? load_streaming(w_row + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      int c = c0 + u * 32;
      if (c < chunks) {
#pragma unroll
        for (int m = 0; m < kM; ++m) acc[m] += dot8(wv[u], __ldg(x_rows + int64_t(m) * chunks + c));
      }
    }
  }
#pragma unroll
  for (int m = 0; m < kM; ++m) acc[m] = warp_sum(acc[m]);
  if (lane == 0) {
#pragma unroll
    for (int m = 0; m < kM; ++m) {
      int64_t at = int64_t(m) * n + feature;
      if (y_bf16) {
        static_cast<bf16*>(y)[at] = __float2bfloat16_rn(acc[m]);
      } else {
        static_cast<float*>(y)[at] = acc[m];
      }
    }
  }
}

template <int kM>
void launch_m(const bf16* x, const bf16* w, void* y, bool y_bf16, int n, int k,
              cudaStream_t stream) {
  gemv_kernel<kM><<<(n + kWarps - 1) / kWarps, kWarps * 32, 0, stream>>>(x, w, y, y_bf16, n, k);
}

}  // namespace

void launch_gemv(const bf16* x, const bf16* w, void* y, bool y_bf16, int m, int n, int k,
                 cudaStream_t stream) {
  if (m == 0 || n == 0) return;
  auto misaligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 != 0; };
  if (m < 0 || m > kGemvMaxTokens || k % 8 != 0 || misaligned(x) || misaligned(w) ||
      misaligned(y)) {
    throw_cuda_failure("launch_gemv", __FILE__, __LINE__,
                       "needs 1..8 tokens, k a multiple of 8 and 16-byte aligned pointers");
  }
  switch (m) {
    case 1: launch_m<1>(x, w, y, y_bf16, n, k, stream); break;
    case 2: launch_m<2>(x, w, y, y_bf16, n, k, stream); break;
    case 3: launch_m<3>(x, w, y, y_bf16, n, k, stream); break;
    case 4: launch_m<4>(x, w, y, y_bf16, n, k, stream); break;
    case 5: launch_m<5>(x, w, y, y_bf16, n, k, stream); break;
    case 6: launch_m<6>(x, w, y, y_bf16, n, k, stream); break;
    case 7: launch_m<7>(x, w, y, y_bf16, n, k, stream); break;
    default: launch_m<8>(x, w, y, y_bf16, n, k, stream); break;
  }
  GPUFRAC_LAUNCH_CHECK();
}

}  // namespace gpufrac::engine
