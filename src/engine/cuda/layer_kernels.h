// The element-wise and per-row kernels of a decoder layer: embedding gather, RMSNorm, q/k norm +
// RoPE + KV-cache write, and SiLU(gate) * up.
//
// Conventions: activations are row-major [tokens][features]; the residual stream is fp32 (so it
// loses nothing between layers; the o and down projections add into it themselves), GEMM inputs
// are bf16, GEMM outputs arrive as GemmOutput (bf16, fp32 or split-K fp32 partials). The KV
// cache of one layer is [blocks][kv_heads][block_size][head_dim] bf16 for K and the same for V;
// a token's slot is block * block_size + offset.
// All launchers are asynchronous on `stream` and check the launch. Those with an `overlap` flag
// can launch their kernel to overlap the previous kernel on the stream (kernel_launch.cuh); every
// kernel here waits for its predecessor before reading anything and lets its successor launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/cuda/cuda_types.h"

namespace gpufrac::engine {

// x[t][:] = embed[id][:] in fp32, id = token_ids[t], or previous_samples[-1 - token_ids[t]] for
// a negative entry (a placeholder for a token the previous step sampled, step_inputs.h).
void launch_embed(const bf16* embed, const int32_t* token_ids, const int32_t* previous_samples,
                  int tokens, int hidden, float* x, cudaStream_t stream);

// out[r] = bf16(x[i] / sqrt(mean(x[i]^2) + eps) * weight) for each output row r, with input row
// i = row_index ? row_index[r] : r.
void launch_rmsnorm(const float* x, const int32_t* row_index, int rows, int hidden,
                    const float* weight, float eps, bf16* out, cudaStream_t stream,
                    bool overlap = false);

struct QkvRopeParams {
  GemmOutput qkv;                    // [tokens][q_width + 2 kv_width]: q | k | v
  const float* bias = nullptr;       // [q_width + 2 kv_width] or null
  const float* q_norm = nullptr;     // [head_dim] or null: per-head RMSNorm on q and k (Qwen3)
  const float* k_norm = nullptr;
  float eps = 1e-6f;
  const float* inv_freq = nullptr;   // [head_dim / 2]; angle = float(position) * inv_freq[i]
  const int32_t* positions = nullptr;     // [tokens]
  const int32_t* slot_mapping = nullptr;  // [tokens]; < 0: K/V not written
  int tokens = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // 32, 64, 128 or 256
  int block_size = 0;
  bf16* q_out = nullptr;    // [tokens][num_heads][head_dim]
  bf16* k_cache = nullptr;  // this layer's K pool
  bf16* v_cache = nullptr;  // this layer's V pool
  bool overlap = false;     // launch to overlap the previous kernel (kernel_launch.cuh)
};
// q, k: (+ bias) -> per-head RMSNorm (if given) -> rotate-half RoPE; v: (+ bias). q goes to
// q_out, k and v to the cache slot of their token.
void launch_qkv_rope_kv(const QkvRopeParams& params, cudaStream_t stream);

// out[t][i] = bf16(silu(gate_up[t][i]) * gate_up[t][intermediate + i]), gate_up bf16 [tokens]
// [2 x intermediate]. Requires (checked) intermediate % 8 == 0 and 16-byte aligned pointers (the
// down projection after it needs k = intermediate a multiple of 8 anyway).
void launch_silu_mul(const bf16* gate_up, int tokens, int intermediate, bf16* out,
                     cudaStream_t stream);

// Head dims the kernels are instantiated for.
bool head_dim_supported(int head_dim);

}  // namespace gpufrac::engine
