// Q/K norm + RoPE of one head of one token, as a warp computes it: shared by launch_qkv_rope_kv
// (layer_kernels.cu) and the decode attention kernel that applies it itself in a decode-only
// step (attention_fast.cu). Lane l holds dims [l * kPerLane, (l + 1) * kPerLane); the
// rotate-half partner of dim i < head_dim / 2 is i + head_dim / 2, which sits in lane l ^ 16.
// The token's cos/sin per frequency come from shared memory (rope_angles: every head of a token
// uses the same angles). Included by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include "engine/cuda/device_math.cuh"
#include "engine/cuda/layer_kernels.h"

namespace gpufrac::engine {

enum class QkvPart { q, k, v };

// Threads [0, kHeadDim / 2) of the block write the angles of token t's position; the caller
// syncs the block before rope_head reads them.
template <int kHeadDim>
__device__ __forceinline__ void rope_angles(const QkvRopeParams& p, int t, float* angle_cos,
                                            float* angle_sin) {
  if (threadIdx.x < kHeadDim / 2) {
    sincosf(float(p.positions[t]) * p.inv_freq[threadIdx.x], &angle_sin[threadIdx.x],
            &angle_cos[threadIdx.x]);
  }
}

// The q/k/v part and head of job `job` of a token: q heads, then k heads, then v heads.
__device__ __forceinline__ QkvPart job_part(const QkvRopeParams& p, int job) {
  return job < p.num_heads                    ? QkvPart::q
         : job < p.num_heads + p.num_kv_heads ? QkvPart::k
                                              : QkvPart::v;
}
__device__ __forceinline__ int job_head(const QkvRopeParams& p, int job) {
  return job < p.num_heads                    ? job
         : job < p.num_heads + p.num_kv_heads ? job - p.num_heads
                                              : job - p.num_heads - p.num_kv_heads;
}

// Head `head` of part `part` of token t (+ bias) into the lane's dims in v. The whole warp calls
// it.
template <int kPerLane>
__device__ __forceinline__ void load_head(const QkvRopeParams& p, int t, QkvPart part, int head,
                                          float (&v)[kPerLane]) {
  constexpr int kHeadDim = kPerLane * 32;
  const int lane = threadIdx.x & 31;
  const int q_width = p.num_heads * kHeadDim, kv_width = p.num_kv_heads * kHeadDim;
  const int columns = q_width + 2 * kv_width;
  const int column = part == QkvPart::q   ? head * kHeadDim
                     : part == QkvPart::k ? q_width + head * kHeadDim
                                          : q_width + kv_width + head * kHeadDim;
  const int dim0 = lane * kPerLane;
  const int64_t at = int64_t(t) * columns + column + dim0;
  if (kPerLane % 4 == 0 && p.qkv.is_bf16) {  // 8-byte loads
    const uint2* src = reinterpret_cast<const uint2*>(static_cast<const bf16*>(p.qkv.data) + at);
#pragma unroll
    for (int q = 0; q < kPerLane / 4; ++q) {
      const uint2 u = src[q];
      const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
      const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
      v[4 * q] = lo.x, v[4 * q + 1] = lo.y, v[4 * q + 2] = hi.x, v[4 * q + 3] = hi.y;
    }
  } else if (kPerLane % 4 == 0 && p.qkv.parts == 1) {  // 16-byte loads
    const float4* src = reinterpret_cast<const float4*>(static_cast<const float*>(p.qkv.data) + at);
#pragma unroll
    for (int q = 0; q < kPerLane / 4; ++q) {
      const float4 f = src[q];
      v[4 * q] = f.x, v[4 * q + 1] = f.y, v[4 * q + 2] = f.z, v[4 * q + 3] = f.w;
    }
  } else {
#pragma unroll
    for (int d = 0; d < kPerLane; ++d) v[d] = read_gemm_output(p.qkv, at + d);
  }
  if (p.bias) {
#pragma unroll
    for (int d = 0; d < kPerLane; ++d) v[d] += p.bias[column + dim0 + d];
  }
}

// A loaded head of part `part`: per-head RMSNorm (q and k, if given) -> rotate-half RoPE (q and
// k); v is left as loaded. The whole warp calls it.
template <int kPerLane>
__device__ __forceinline__ void norm_rope_head(const QkvRopeParams& p, QkvPart part,
                                               const float* angle_cos, const float* angle_sin,
                                               float (&v)[kPerLane]) {
  constexpr int kHeadDim = kPerLane * 32;
  if (part == QkvPart::v) return;
  const int lane = threadIdx.x & 31, dim0 = lane * kPerLane;
  const float* norm = part == QkvPart::q ? p.q_norm : p.k_norm;
  if (norm) {
    float sum_squares = 0;
#pragma unroll
    for (int d = 0; d < kPerLane; ++d) sum_squares += v[d] * v[d];
    const float scale = rsqrtf(warp_sum(sum_squares) / float(kHeadDim) + p.eps);
#pragma unroll
    for (int d = 0; d < kPerLane; ++d) v[d] = v[d] * scale * norm[dim0 + d];
  }
  const bool first_half = lane < 16;
#pragma unroll
  for (int d = 0; d < kPerLane; ++d) {
    const float partner = __shfl_xor_sync(0xffffffffu, v[d], 16);
    const int i = (dim0 + d) % (kHeadDim / 2);
    const float s = angle_sin[i], c = angle_cos[i];
    v[d] = first_half ? v[d] * c - partner * s : v[d] * c + partner * s;
  }
}

// Head `head` of part `part` of token t: load_head, then norm_rope_head.
template <int kPerLane>
__device__ __forceinline__ void rope_head(const QkvRopeParams& p, int t, QkvPart part, int head,
                                          const float* angle_cos, const float* angle_sin,
                                          float (&v)[kPerLane]) {
  load_head<kPerLane>(p, t, part, head, v);
  norm_rope_head<kPerLane>(p, part, angle_cos, angle_sin, v);
}

// Where token t's K (part k) or V (part v) of KV head `head` goes in the cache; null when the
// token has no slot (slot_mapping < 0).
template <int kHeadDim>
__device__ __forceinline__ bf16* kv_slot(const QkvRopeParams& p, int t, QkvPart part, int head) {
  const int slot = p.slot_mapping[t];
  if (slot < 0) return nullptr;
  const int64_t block = slot / p.block_size, offset = slot % p.block_size;
  bf16* cache = part == QkvPart::k ? p.k_cache : p.v_cache;
  return cache + ((block * p.num_kv_heads + head) * p.block_size + offset) * kHeadDim;
}

// The lane's dims of one head as bf16 at dst (the head's first element).
template <int kPerLane>
__device__ __forceinline__ void store_head(bf16* dst, const float (&v)[kPerLane]) {
  const int dim0 = (threadIdx.x & 31) * kPerLane;
  if constexpr (kPerLane % 4 == 0) {
#pragma unroll
    for (int q = 0; q < kPerLane / 4; ++q) store_bf16x4(dst + dim0 + 4 * q, v + 4 * q);
  } else {
#pragma unroll
    for (int d = 0; d < kPerLane; ++d) dst[dim0 + d] = __float2bfloat16_rn(v[d]);
  }
}

}  // namespace gpufrac::engine
