#include "engine/cuda/layer_kernels.h"

#include <algorithm>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device_math.cuh"
#include "engine/cuda/kernel_launch.cuh"
#include "engine/cuda/rope.cuh"

namespace gpufrac::engine {

namespace {

__global__ void embed_kernel(const bf16* embed, const int32_t* token_ids,
                             const int32_t* previous_samples, int hidden, float* x) {
  wait_for_previous_grid();
  allow_next_grid_launch();
  int t = blockIdx.x;
  int32_t id = token_ids[t];
  if (id < 0) id = previous_samples[-1 - id];
  const bf16* row = embed + int64_t(id) * hidden;
  float* out = x + int64_t(t) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[i] = __bfloat162float(row[i]);
}

__global__ void rmsnorm_kernel(const float* x, const int32_t* row_index, int hidden,
                               const float* weight, float eps, bf16* out) {
  __shared__ float scratch[32];
  wait_for_previous_grid();
  allow_next_grid_launch();
  const int r = blockIdx.x;
  const float* xr = x + int64_t(row_index ? row_index[r] : r) * hidden;
  float sum_squares = 0;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) sum_squares += xr[i] * xr[i];
  const float scale = rsqrtf(block_sum(sum_squares, scratch) / float(hidden) + eps);
  bf16* o = out + int64_t(r) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    o[i] = __float2bfloat16_rn(xr[i] * scale * weight[i]);
  }
}

// rmsnorm_kernel for the common case (hidden % 4 == 0, 16-byte aligned rows): each thread keeps
// its kVec float4 of the row in registers, so the row is read once with 16-byte loads (all in
// flight before the reduction).
template <int kVec>
__global__ void rmsnorm_vec_kernel(const float* x, const int32_t* row_index, int hidden,
                                   const float* weight, float eps, bf16* out) {
  __shared__ float scratch[32];
  wait_for_previous_grid();
  allow_next_grid_launch();
  const int r = blockIdx.x;
  const int n4 = hidden / 4;
  const float4* xr =
      reinterpret_cast<const float4*>(x + int64_t(row_index ? row_index[r] : r) * hidden);
  float4 v[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const int idx = threadIdx.x + i * blockDim.x;
    v[i] = idx < n4 ? xr[idx] : make_float4(0, 0, 0, 0);
  }
  float sum_squares = 0;
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    sum_squares += v[i].x * v[i].x + v[i].y * v[i].y + v[i].z * v[i].z + v[i].w * v[i].w;
  }
  const float scale = rsqrtf(block_sum(sum_squares, scratch) / float(hidden) + eps);
  const float4* w4 = reinterpret_cast<const float4*>(weight);
  bf16* o = out + int64_t(r) * hidden;
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const int idx = threadIdx.x + i * blockDim.x;
    if (idx < n4) {
      const float4 w = w4[idx];
      const float y[4] = {v[i].x * scale * w.x, v[i].y * scale * w.y, v[i].z * scale * w.z,
                          v[i].w * scale * w.w};
      store_bf16x4(o + idx * 4, y);
    }
  }
}

// Grid (token, group of heads): each warp takes kJobsPerWarp of the token's heads (rope.cuh: q
// heads, then k, then v), issuing all of their loads before the block computes the token's
// angles once into shared memory; then each head's norm + RoPE and store.
constexpr int kJobsPerWarp = 4;

template <int kPerLane>
__global__ void qkv_rope_kv_kernel(QkvRopeParams p) {
  constexpr int kHeadDim = kPerLane * 32;
  __shared__ float angle_cos[kHeadDim / 2], angle_sin[kHeadDim / 2];
  wait_for_previous_grid();
  allow_next_grid_launch();
  const int t = blockIdx.x;
  const int jobs = p.num_heads + 2 * p.num_kv_heads;
  const int warps = int(blockDim.x >> 5);
  const int first_job = int(blockIdx.y) * warps * kJobsPerWarp + int(threadIdx.x >> 5);
  float v[kJobsPerWarp][kPerLane];
#pragma unroll
  for (int i = 0; i < kJobsPerWarp; ++i) {
    const int job = first_job + i * warps;
    if (job < jobs) load_head<kPerLane>(p, t, job_part(p, job), job_head(p, job), v[i]);
  }
  rope_angles<kHeadDim>(p, t, angle_cos, angle_sin);
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kJobsPerWarp; ++i) {
    const int job = first_job + i * warps;
    if (job >= jobs) break;
    const QkvPart part = job_part(p, job);
    const int head = job_head(p, job);
    norm_rope_head<kPerLane>(p, part, angle_cos, angle_sin, v[i]);
    bf16* dst = part == QkvPart::q ? p.q_out + (int64_t(t) * p.num_heads + head) * kHeadDim
                                   : kv_slot<kHeadDim>(p, t, part, head);
    if (dst) store_head<kPerLane>(dst, v[i]);
  }
}

// Thread (x, token row) takes 8 consecutive outputs, reading gate and up with one 16-byte load
// each; the grid's rows stride over the tokens.
__global__ void silu_mul_kernel(const bf16* gate_up, int tokens, int intermediate, bf16* out) {
  const int chunk = blockIdx.x * blockDim.x + threadIdx.x;
  if (chunk >= intermediate / 8) return;
  for (int64_t t = blockIdx.y; t < tokens; t += gridDim.y) {
    const bf16* row = gate_up + t * 2 * intermediate;
    const uint4 gate_raw = reinterpret_cast<const uint4*>(row)[chunk];
    const uint4 up_raw = reinterpret_cast<const uint4*>(row + intermediate)[chunk];
    const __nv_bfloat162* gate2 = reinterpret_cast<const __nv_bfloat162*>(&gate_raw);
    const __nv_bfloat162* up2 = reinterpret_cast<const __nv_bfloat162*>(&up_raw);
    uint4 result;
    __nv_bfloat162* result2 = reinterpret_cast<__nv_bfloat162*>(&result);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 g = __bfloat1622float2(gate2[i]), u = __bfloat1622float2(up2[i]);
      result2[i] = __floats2bfloat162_rn(g.x / (1.0f + __expf(-g.x)) * u.x,
                                         g.y / (1.0f + __expf(-g.y)) * u.y);
    }
    reinterpret_cast<uint4*>(out + t * intermediate)[chunk] = result;
  }
}

int norm_threads(int hidden) { return hidden >= 1024 ? 256 : hidden >= 256 ? 128 : 64; }

}  // namespace

bool head_dim_supported(int head_dim) {
  return head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256;
}

void launch_embed(const bf16* embed, const int32_t* token_ids, const int32_t* previous_samples,
                  int tokens, int hidden, float* x, cudaStream_t stream) {
  if (tokens == 0) return;
  embed_kernel<<<tokens, norm_threads(hidden), 0, stream>>>(embed, token_ids, previous_samples,
                                                            hidden, x);
  GPUFRAC_LAUNCH_CHECK();
}

void launch_rmsnorm(const float* x, const int32_t* row_index, int rows, int hidden,
                    const float* weight, float eps, bf16* out, cudaStream_t stream, bool overlap) {
  if (rows == 0) return;
  constexpr int kVec = 4;
  auto aligned = [](const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; };
  if (hidden % 4 == 0 && hidden / 4 <= kVec * 1024 && aligned(x, 16) && aligned(weight, 16) &&
      aligned(out, 8)) {
    const int per_thread = (hidden / 4 + kVec - 1) / kVec;
    const int threads = (per_thread + 31) / 32 * 32;
    launch_kernel(rmsnorm_vec_kernel<kVec>, dim3(rows), dim3(threads), 0, stream, overlap, x,
                  row_index, hidden, weight, eps, out);
  } else {
    launch_kernel(rmsnorm_kernel, dim3(rows), dim3(norm_threads(hidden)), 0, stream, overlap, x,
                  row_index, hidden, weight, eps, out);
  }
}

template <int kPerLane>
void launch_qkv_rope_kv_kernel(const QkvRopeParams& p, cudaStream_t stream) {
  constexpr int kWarps = 4;
  const int jobs = p.num_heads + 2 * p.num_kv_heads;
  const dim3 grid(p.tokens, (jobs + kWarps * kJobsPerWarp - 1) / (kWarps * kJobsPerWarp));
  launch_kernel(qkv_rope_kv_kernel<kPerLane>, grid, dim3(kWarps * 32), 0, stream, p.overlap, p);
}

void launch_qkv_rope_kv(const QkvRopeParams& p, cudaStream_t stream) {
  if (p.tokens == 0) return;
  switch (p.head_dim) {
    case 32: launch_qkv_rope_kv_kernel<1>(p, stream); break;
    case 64: launch_qkv_rope_kv_kernel<2>(p, stream); break;
    case 128: launch_qkv_rope_kv_kernel<4>(p, stream); break;
    case 256: launch_qkv_rope_kv_kernel<8>(p, stream); break;
    default: throw_cuda_failure("launch_qkv_rope_kv", __FILE__, __LINE__, "unsupported head_dim");
  }
}

void launch_silu_mul(const bf16* gate_up, int tokens, int intermediate, bf16* out,
                     cudaStream_t stream) {
  if (tokens == 0 || intermediate == 0) return;
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (intermediate % 8 != 0 || !aligned(gate_up) || !aligned(out)) {
    throw_cuda_failure("launch_silu_mul", __FILE__, __LINE__,
                       "needs intermediate a multiple of 8 and 16-byte aligned pointers");
  }
  const dim3 grid((intermediate / 8 + 255) / 256, std::min(tokens, 65535));
  silu_mul_kernel<<<grid, 256, 0, stream>>>(gate_up, tokens, intermediate, out);
  GPUFRAC_LAUNCH_CHECK();
}

}  // namespace gpufrac::engine
