// The shape and constants of a dense decoder-only transformer (Qwen3, Qwen2 or Llama 3), as read
// from a Hugging Face config.json or taken from a preset. Plain data; sizes in elements.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpufrac::engine {

enum class ModelFamily { kQwen3, kQwen2, kLlama };

// Llama 3.x "rope_scaling": {"rope_type": "llama3", ...}; factor 0 means no scaling.
struct RopeScaling {
  double factor = 0;
  double low_freq_factor = 1;
  double high_freq_factor = 4;
  int original_max_position_embeddings = 8192;
};

struct ModelConfig {
  std::string name;  // preset name or the checkpoint directory's name
  ModelFamily family = ModelFamily::kQwen3;
  int num_layers = 0;
  int hidden_size = 0;
  int num_heads = 0;      // query heads
  int num_kv_heads = 0;   // GQA: num_heads is a multiple of this
  int head_dim = 0;       // q width = num_heads * head_dim, which may differ from hidden_size
  int intermediate_size = 0;
  int vocab_size = 0;
  int max_position_embeddings = 0;
  double rope_theta = 10000;
  RopeScaling rope_scaling;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool qk_norm = false;   // Qwen3: per-head RMSNorm on q and k before RoPE
  bool qkv_bias = false;  // Qwen2: biases on the q, k and v projections
  std::vector<int32_t> eos_token_ids;  // generation stops on any of these unless ignore_eos

  int q_width() const { return num_heads * head_dim; }
  int kv_width() const { return num_kv_heads * head_dim; }
};

}  // namespace gpufrac::engine
