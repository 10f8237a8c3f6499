// Device-side helpers shared by the kernels: bf16 <-> fp32 vector conversions, warp and block
// reductions, asynchronous copies into shared memory, and the "GEMM output" reader that lets a
// consumer kernel sum split-K partials.
// Header-only, included by .cu files only.
#pragma once

#include <cuda_bf16.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "engine/cuda/cuda_types.h"

namespace gpufrac::engine {

__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

__device__ __forceinline__ float warp_max(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
// `scratch` holds 32 floats; the call contains __syncthreads(), so all threads must reach it.
__device__ __forceinline__ float block_sum(float value, float* scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  value = warp_sum(value);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  int warps = blockDim.x >> 5;
  value = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(value);
}

// Maximum over the whole block, as block_sum.
__device__ __forceinline__ float block_reduce_max(float value, float* scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  value = warp_max(value);
  __syncthreads();
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  int warps = blockDim.x >> 5;
  value = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(value);
}

// A scored id; "better" orders by score, ties to the lower index (a strict total order). The
// samplers' argmax and the logprobs' top ids use it.
struct Best {
  float value;
  int index;
};

__device__ __forceinline__ bool better(Best a, Best b) {
  return a.value > b.value || (a.value == b.value && a.index < b.index);
}

// Argmax over the block, ties to the lower index; every thread gets the winner. `scratch` holds
// 32 entries; the call contains __syncthreads(), so all threads must reach it.
__device__ __forceinline__ Best block_argmax(Best mine, Best* scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    Best other{__shfl_xor_sync(0xffffffffu, mine.value, offset),
               __shfl_xor_sync(0xffffffffu, mine.index, offset)};
    if (better(other, mine)) mine = other;
  }
  __syncthreads();
  if (lane == 0) scratch[warp] = mine;
  __syncthreads();
  mine = lane < (blockDim.x >> 5) ? scratch[lane] : Best{-INFINITY, INT_MAX};
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    Best other{__shfl_xor_sync(0xffffffffu, mine.value, offset),
               __shfl_xor_sync(0xffffffffu, mine.index, offset)};
    if (better(other, mine)) mine = other;
  }
  return mine;
}

// Four consecutive bf16 (8 bytes, 8-byte aligned) as floats.
__device__ __forceinline__ void load_bf16x4(const bf16* src, float out[4]) {
  uint2 raw = *reinterpret_cast<const uint2*>(src);
  __nv_bfloat162 lo = *reinterpret_cast<__nv_bfloat162*>(&raw.x);
  __nv_bfloat162 hi = *reinterpret_cast<__nv_bfloat162*>(&raw.y);
  float2 a = __bfloat1622float2(lo), b = __bfloat1622float2(hi);
  out[0] = a.x;
  out[1] = a.y;
  out[2] = b.x;
  out[3] = b.y;
}

__device__ __forceinline__ void store_bf16x4(bf16* dst, const float in[4]) {
  __nv_bfloat162 lo = __floats2bfloat162_rn(in[0], in[1]);
  __nv_bfloat162 hi = __floats2bfloat162_rn(in[2], in[3]);
  uint2 raw;
  raw.x = *reinterpret_cast<uint32_t*>(&lo);
  raw.y = *reinterpret_cast<uint32_t*>(&hi);
  *reinterpret_cast<uint2*>(dst) = raw;
}

// Starts a 16-byte copy from global memory to the shared-memory address `shared` (a
// __cvta_generic_to_shared value): cp.async.cg, through L2 only. It lands at cp_async_wait after
// the cp_async_commit of its group.
__device__ __forceinline__ void cp_async_16(uint32_t shared, const void* global) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared), "l"(global));
}

// Closes this thread's group of cp.async copies started since the last commit.
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most `kPending` committed groups of this thread are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Reads element `index` of a GEMM output (GemmOutput in cuda_types.h): the sum of its split-K
// partials (fp32) or the single bf16/fp32 value.
__device__ __forceinline__ float read_gemm_output(const GemmOutput& out, int64_t index) {
  if (out.is_bf16) return __bfloat162float(static_cast<const bf16*>(out.data)[index]);
  const float* data = static_cast<const float*>(out.data);
  float sum = data[index];
  for (int p = 1; p < out.parts; ++p) sum += data[index + p * out.part_stride];
  return sum;
}

}  // namespace gpufrac::engine
