// The weights of one dense decoder (Qwen3, Qwen2, Llama 3) in host memory, laid out for the
// runners: QKV fused into one matrix and gate|up fused into another at load time, so that every
// layer is four GEMMs (qkv, o, gate_up, down).
//
// Contract:
// - Every HostTensor keeps the dtype it was stored in (bf16 checkpoints stay bf16: 8 GB for
//   Qwen3-4B, not 16). Tensors of one checkpoint may differ in dtype (e.g. fp32 norms next to bf16
//   matrices); a fused tensor has one dtype (that of its parts, or fp32 if they disagree).
// - Linear weights are row-major [out, in]; y = x W^T.
// - `storage` keeps all bytes alive (mmapped files, owned buffers). A copy of a ModelWeights
//   shares them; the data is read-only after loading, so any number of threads may read it.
// - When config.tie_word_embeddings, lm_head is a copy of the embed_tokens view (same pointer).
// - Shapes always agree with `config`: loaders and generators call validate() before returning.
//
// Loaders: load_model_weights() (model_loader.h) for a preset name or a checkpoint directory.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/tensor.h"

namespace gpufrac::engine {

struct LayerWeights {
  HostTensor input_norm;           // [hidden]
  HostTensor qkv_proj;             // [q_width + 2 * kv_width, hidden]: rows q | k | v
  HostTensor qkv_bias;             // [q_width + 2 * kv_width]: q | k | v; empty unless qkv_bias
  HostTensor q_norm;               // [head_dim], shared by all q heads; empty unless qk_norm
  HostTensor k_norm;               // [head_dim], shared by all kv heads; empty unless qk_norm
  HostTensor o_proj;               // [hidden, q_width]
  HostTensor post_attention_norm;  // [hidden]
  HostTensor gate_up_proj;         // [2 * intermediate, hidden]: rows gate | up
  HostTensor down_proj;            // [hidden, intermediate]
};

struct ModelWeights {
  ModelConfig config;
  HostTensor embed_tokens;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  HostTensor final_norm;  // [hidden]
  HostTensor lm_head;     // [vocab, hidden]; == embed_tokens when tied
  std::vector<std::shared_ptr<const void>> storage;

  // An uninitialized owned buffer of `bytes` (64-byte aligned) that lives as long as this
  // ModelWeights (or a copy of it) does. For loaders and generators, which fill all of it.
  void* allocate(uint64_t bytes);
  // Bytes of distinct weight data (the tied lm_head counted once).
  uint64_t total_bytes() const;
  // Throws RuntimeFailure naming the first tensor that is missing, present where the config says
  // it must not be, or shaped unlike the config.
  void validate() const;
};

}  // namespace gpufrac::engine
