// The model's weights on the GPU, uploaded once: matrices in bf16 (whatever the checkpoint's
// dtype), norm weights and biases in fp32, all in one allocation with every tensor 256-byte
// aligned. A tied lm_head is the embedding itself (no second copy).
//
// Two ways in:
// - upload(): from host ModelWeights (a checkpoint, or a preset generated on the host). Host
//   bytes pass through a page-locked staging buffer; fp32/fp16 matrices are rounded to bf16.
// - generate(): a preset's seeded random weights made directly on the GPU, bit-identical to
//   generate_random_weights() (presets.cpp) for the same config and seed, so qwen3-4b needs no
//   8 GB of host generation. cuda_weights_test checks the bit-identity on `tiny`.
//
// Owns its memory; read-only after construction, so kernels on any stream may read it.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/cuda/cuda_types.h"
#include "engine/cuda/device_buffer.h"
#include "engine/model/model_config.h"
#include "engine/model/weights.h"

namespace gpufrac::engine {

struct DeviceLayerWeights {
  const float* input_norm = nullptr;           // [hidden]
  const bf16* qkv_proj = nullptr;              // [q_width + 2 kv_width, hidden]: q | k | v rows
  const float* qkv_bias = nullptr;             // [q_width + 2 kv_width], or null
  const float* q_norm = nullptr;               // [head_dim], or null (no q/k norm)
  const float* k_norm = nullptr;               // [head_dim], or null
  const bf16* o_proj = nullptr;                // [hidden, q_width]
  const float* post_attention_norm = nullptr;  // [hidden]
  const bf16* gate_up_proj = nullptr;          // [2 intermediate, hidden]: gate | up rows
  const bf16* down_proj = nullptr;             // [hidden, intermediate]
};

class DeviceWeights {
 public:
  static DeviceWeights upload(const ModelWeights& weights);
  static DeviceWeights generate(const ModelConfig& config, uint64_t seed);

  const ModelConfig& config() const { return config_; }
  uint64_t bytes() const { return buffer_.bytes(); }

  const bf16* embed_tokens = nullptr;  // [vocab, hidden]
  const bf16* lm_head = nullptr;       // [vocab, hidden]; == embed_tokens when tied
  const float* final_norm = nullptr;   // [hidden]
  std::vector<DeviceLayerWeights> layers;

 private:
  ModelConfig config_;
  DeviceBuffer buffer_;
};

}  // namespace gpufrac::engine
