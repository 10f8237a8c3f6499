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

// "qwen3", "qwen2", "llama": the model_type of config.json.
const char* model_family_name(ModelFamily family);

// Parses the text of a Hugging Face config.json (families by "model_type": qwen3, qwen2, llama).
// `source` names the file in errors. Throws UsageError with one line naming the field and what
// it must be; rejects what the engine cannot run (sliding windows, o/mlp biases, rope types other
// than default/llama3, activations other than silu).
ModelConfig parse_model_config(const std::string& config_json_text, const std::string& name,
                               const std::string& source = "config.json");
// Reads <dir>/config.json, plus eos ids from <dir>/generation_config.json when it exists.
// The config's name is the directory's last component.
ModelConfig load_model_config(const std::string& checkpoint_dir);

// RoPE inverse frequencies, head_dim / 2 of them: theta^(-2i/head_dim), adjusted by llama3
// rope_scaling when present. Element i of a head pairs with element i + head_dim/2 (rotate-half).
std::vector<double> rope_inverse_frequencies(const ModelConfig& config);

}  // namespace gpufrac::engine
