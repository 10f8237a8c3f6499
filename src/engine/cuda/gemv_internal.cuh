// What the two GEMV forms of gemv.h share: their arguments, the SM count they size grids for,
// and the tensor-core form's entry (gemv_mma.cu) that launch_gemv dispatches to. Included by
// gemv.cu and gemv_mma.cu only.
#pragma once

#include <cuda_runtime.h>

#include <atomic>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/gemv.h"

namespace gpufrac::engine {

struct GemvArgs {
  const bf16* x;
  const bf16* w;
  void* y;
  GemvStore store;
  int n, k;
  GemvNorm leaves;         // weight null: none
  const float* take_sums;  // null: x as it is
  int take_parts;
  float take_eps;
};

// y[at] (output f of its token row) = v as a.store says; with a GemvNorm left, also its row and
// the square of the updated residual value, which it returns (0 otherwise).
__device__ __forceinline__ float store_output(const GemvArgs& a, int64_t at, int f, float v) {
  switch (a.store) {
    case GemvStore::bf16: static_cast<bf16*>(a.y)[at] = __float2bfloat16_rn(v); break;
    case GemvStore::fp32: static_cast<float*>(a.y)[at] = v; break;
    case GemvStore::add_fp32: {
      float* y = static_cast<float*>(a.y);
      const float r = y[at] + v;
      y[at] = r;
      if (a.leaves.weight) {
        a.leaves.rows[at] = __float2bfloat16_rn(r * a.leaves.weight[f]);
        return r * r;
      }
      break;
    }
  }
  return 0.0f;
}

// A positive property of the current device, computed once per device by `compute` and kept
// in `table` (zero: not yet; devices past its size compute it every time).
template <int kDevices, typename Compute>
int once_per_device(std::atomic<int> (&table)[kDevices], Compute compute) {
  int device = 0;
  GPUFRAC_CUDA_CHECK(cudaGetDevice(&device));
  int value = device < kDevices ? table[device].load(std::memory_order_relaxed) : 0;
  if (value == 0) {
    value = compute(device);
    if (device < kDevices) table[device].store(value, std::memory_order_relaxed);
  }
  return value;
}

// SMs of the current device the process may use (cudaDevAttrMultiProcessorCount, which an MPS
// active-thread percentage lowers), asked once per device.
int device_sms();

// Plain outputs per tile of the tensor-core form: GemvNorm::parts = ceil(n / this) beyond
// kGemvSimtMaxTokens tokens.
int gemv_mma_tile_outputs();

// The tensor-core form for kGemvSimtMaxTokens < m <= kGemvMaxTokens (a checked by the caller).
void launch_gemv_mma(const GemvArgs& a, bool silu, int m, const GemvScratch& scratch,
                     cudaStream_t stream, bool overlap);

}  // namespace gpufrac::engine
