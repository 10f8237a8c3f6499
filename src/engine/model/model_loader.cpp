#include "engine/model/model_loader.h"

#include <filesystem>
#include <set>

#include "common/error.h"
#include "engine/model/presets.h"
#include "engine/model/safetensors.h"

namespace gpufrac::engine {

namespace {

class CheckpointReader {
 public:
  CheckpointReader(const SafetensorsCheckpoint& checkpoint, ModelWeights& weights)
      : checkpoint_(checkpoint), weights_(weights) {}

  // The tensor `name`, which must have `shape`.
  HostTensor view(const std::string& name, const std::vector<int64_t>& shape) {
    HostTensor tensor = checkpoint_.tensor(name);
    if (tensor.shape != shape) {
      HostTensor wanted{tensor.dtype, shape, nullptr};
      throw RuntimeFailure(checkpoint_.file_of(name) + ": tensor " + name + " has shape " +
                           tensor.shape_string() + ", config.json implies " +
                           wanted.shape_string());
    }
    used_.insert(name);
    return tensor;
  }

  // Parts (each [rows_i, cols...]) stacked along dim 0 into one owned tensor. The fused dtype is
  // the parts' common dtype, or fp32 when they differ.
  HostTensor fused(const std::vector<std::pair<std::string, std::vector<int64_t>>>& parts) {
    std::vector<HostTensor> views;
    for (const auto& [name, shape] : parts) views.push_back(view(name, shape));
    DType dtype = views[0].dtype;
    for (const HostTensor& v : views) {
      if (v.dtype != dtype) dtype = DType::kF32;
    }
    HostTensor out{dtype, views[0].shape, nullptr};
    out.shape[0] = 0;
    for (const HostTensor& v : views) out.shape[0] += v.shape[0];
    auto* bytes = static_cast<unsigned char*>(weights_.allocate(out.bytes()));
    out.data = bytes;
    for (const HostTensor& v : views) {
      convert_elements(v.data, v.dtype, bytes, dtype, v.numel());
      bytes += uint64_t(v.numel()) * dtype_bytes(dtype);
    }
    return out;
  }

  // Fails on tensors the engine did not use (their effect would be silently lost).
  void reject_unused(const std::set<std::string>& tolerated) const {
    for (const std::string& name : all_names_) {
      if (used_.count(name) || tolerated.count(name)) continue;
      if (name.ends_with("rotary_emb.inv_freq")) continue;  // a buffer older exports include
      throw RuntimeFailure(checkpoint_.file_of(name) + ": tensor " + name + " is not part of a " +
                           std::string(model_family_name(weights_.config.family)) +
                           " model as config.json describes it (check model_type and biases)");
    }
  }

  void set_all_names(std::vector<std::string> names) { all_names_ = std::move(names); }

 private:
  const SafetensorsCheckpoint& checkpoint_;
  ModelWeights& weights_;
  std::set<std::string> used_;
  std::vector<std::string> all_names_;
};

}  // namespace

ModelWeights load_checkpoint_weights(const std::string& checkpoint_dir) {
  ModelWeights w;
  w.config = load_model_config(checkpoint_dir);
  SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(checkpoint_dir);
  w.storage = checkpoint.mappings();
  const ModelConfig& c = w.config;
  CheckpointReader reader(checkpoint, w);
  reader.set_all_names(checkpoint.tensor_names());

  int64_t hidden = c.hidden_size, vocab = c.vocab_size, inter = c.intermediate_size;
  int64_t q = c.q_width(), kv = c.kv_width();
  w.embed_tokens = reader.view("model.embed_tokens.weight", {vocab, hidden});
  w.final_norm = reader.view("model.norm.weight", {hidden});
  w.lm_head = c.tie_word_embeddings ? w.embed_tokens : reader.view("lm_head.weight", {vocab, hidden});
  for (int i = 0; i < c.num_layers; ++i) {
    std::string p = "model.layers." + std::to_string(i) + ".";
    std::string attn = p + "self_attn.", mlp = p + "mlp.";
    LayerWeights l;
    l.input_norm = reader.view(p + "input_layernorm.weight", {hidden});
    l.qkv_proj = reader.fused({{attn + "q_proj.weight", {q, hidden}},
                               {attn + "k_proj.weight", {kv, hidden}},
                               {attn + "v_proj.weight", {kv, hidden}}});
    if (c.qkv_bias) {
      l.qkv_bias = reader.fused({{attn + "q_proj.bias", {q}},
                                 {attn + "k_proj.bias", {kv}},
                                 {attn + "v_proj.bias", {kv}}});
    }
    if (c.qk_norm) {
      l.q_norm = reader.view(attn + "q_norm.weight", {c.head_dim});
      l.k_norm = reader.view(attn + "k_norm.weight", {c.head_dim});
    }
    l.o_proj = reader.view(attn + "o_proj.weight", {hidden, q});
    l.post_attention_norm = reader.view(p + "post_attention_layernorm.weight", {hidden});
    l.gate_up_proj = reader.fused({{mlp + "gate_proj.weight", {inter, hidden}},
                                   {mlp + "up_proj.weight", {inter, hidden}}});
    l.down_proj = reader.view(mlp + "down_proj.weight", {hidden, inter});
    w.layers.push_back(std::move(l));
  }
  // Tied checkpoints may still carry a copy of the embedding as lm_head.weight.
  reader.reject_unused({"lm_head.weight"});
  w.validate();
  return w;
}

ModelWeights load_model_weights(const std::string& model, uint64_t seed, int threads) {
  if (std::optional<ModelConfig> preset = find_preset(model)) {
    return generate_random_weights(*preset, seed, threads);
  }
  if (std::filesystem::is_directory(model)) return load_checkpoint_weights(model);
  std::string presets;
  for (const std::string& name : preset_names()) presets += (presets.empty() ? "" : ", ") + name;
  throw UsageError("--model '" + model + "' is neither a preset (" + presets +
                   ") nor a checkpoint directory");
}

}  // namespace gpufrac::engine
