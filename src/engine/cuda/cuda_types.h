// Plain types shared by the CUDA runner's host code and its kernels (includable from .cpp and
// .cu files alike).
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

namespace gpufrac::engine {

using bf16 = __nv_bfloat16;

// Where a GEMM left y[rows][cols]: one bf16 or fp32 matrix (parts = 1), or `parts` fp32
// split-K partials `part_stride` elements apart whose sum is y. Consumer kernels read it
// through read_gemm_output() (device_math.cuh), so the GEMM can pick its strategy freely.
struct GemmOutput {
  const void* data = nullptr;
  bool is_bf16 = false;
  int parts = 1;
  int64_t part_stride = 0;  // elements
};

}  // namespace gpufrac::engine
