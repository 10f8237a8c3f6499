// Helpers for the model tests: a scratch directory, a minimal safetensors writer (independent of
// the loader under test), and export of ModelWeights as a Hugging Face checkpoint (config.json +
// unfused tensors), so that loading it back exercises the whole checkpoint path.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/json.h"
#include "engine/model/weights.h"

namespace gpufrac::engine::test_util {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() /
            ("gpufrac-" + tag + "-" + std::to_string(getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  std::string path() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  static int& counter() {
    static int next = 0;
    return next;
  }
  std::filesystem::path path_;
};

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

struct TensorBytes {
  std::string name;
  std::string dtype;  // as safetensors spells it
  std::vector<int64_t> shape;
  std::string bytes;
};

inline TensorBytes tensor_bytes(const std::string& name, const HostTensor& tensor) {
  return {name, dtype_name(tensor.dtype), tensor.shape,
          std::string(static_cast<const char*>(tensor.data), tensor.bytes())};
}

// The safetensors layout written by hand: u64 header length, JSON header padded with spaces to
// a multiple of 8, then the data in order.
inline void write_safetensors(const std::string& path, const std::vector<TensorBytes>& tensors) {
  Json header = Json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const TensorBytes& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  std::ofstream out(path, std::ios::binary);
  uint64_t length = text.size();
  for (int i = 0; i < 8; ++i) out.put(char((length >> (8 * i)) & 0xff));
  out << text;
  for (const TensorBytes& t : tensors) out << t.bytes;
}

inline Json config_json(const ModelConfig& c) {
  Json j = {{"model_type", model_family_name(c.family)},
            {"hidden_size", c.hidden_size},
            {"num_hidden_layers", c.num_layers},
            {"num_attention_heads", c.num_heads},
            {"num_key_value_heads", c.num_kv_heads},
            {"head_dim", c.head_dim},
            {"intermediate_size", c.intermediate_size},
            {"vocab_size", c.vocab_size},
            {"max_position_embeddings", c.max_position_embeddings},
            {"rope_theta", c.rope_theta},
            {"rms_norm_eps", c.rms_norm_eps},
            {"tie_word_embeddings", c.tie_word_embeddings},
            {"hidden_act", "silu"},
            {"torch_dtype", "bfloat16"}};
  if (!c.eos_token_ids.empty()) j["eos_token_id"] = c.eos_token_ids;
  if (c.rope_scaling.factor > 0) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", c.rope_scaling.factor},
                         {"low_freq_factor", c.rope_scaling.low_freq_factor},
                         {"high_freq_factor", c.rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings",
                          c.rope_scaling.original_max_position_embeddings}};
  }
  return j;
}

// Rows [begin, begin + count) of a 2-D (or 1-D) tensor as raw bytes.
inline TensorBytes row_slice(const std::string& name, const HostTensor& t, int64_t begin,
                             int64_t count) {
  std::vector<int64_t> shape = t.shape;
  shape[0] = count;
  size_t row_bytes = size_t(t.bytes() / uint64_t(t.rows()));
  const char* data = static_cast<const char*>(t.data) + size_t(begin) * row_bytes;
  return {name, dtype_name(t.dtype), shape, std::string(data, size_t(count) * row_bytes)};
}

// All tensors of `w` under Hugging Face names, q/k/v and gate/up split apart again.
inline std::vector<TensorBytes> hf_tensors(const ModelWeights& w) {
  const ModelConfig& c = w.config;
  std::vector<TensorBytes> out;
  out.push_back(tensor_bytes("model.embed_tokens.weight", w.embed_tokens));
  out.push_back(tensor_bytes("model.norm.weight", w.final_norm));
  if (!c.tie_word_embeddings) out.push_back(tensor_bytes("lm_head.weight", w.lm_head));
  for (int i = 0; i < c.num_layers; ++i) {
    const LayerWeights& l = w.layers[i];
    std::string p = "model.layers." + std::to_string(i) + ".";
    out.push_back(tensor_bytes(p + "input_layernorm.weight", l.input_norm));
    out.push_back(tensor_bytes(p + "post_attention_layernorm.weight", l.post_attention_norm));
    out.push_back(row_slice(p + "self_attn.q_proj.weight", l.qkv_proj, 0, c.q_width()));
    out.push_back(row_slice(p + "self_attn.k_proj.weight", l.qkv_proj, c.q_width(), c.kv_width()));
    out.push_back(row_slice(p + "self_attn.v_proj.weight", l.qkv_proj, c.q_width() + c.kv_width(),
                            c.kv_width()));
    if (c.qkv_bias) {
      out.push_back(row_slice(p + "self_attn.q_proj.bias", l.qkv_bias, 0, c.q_width()));
      out.push_back(row_slice(p + "self_attn.k_proj.bias", l.qkv_bias, c.q_width(), c.kv_width()));
      out.push_back(row_slice(p + "self_attn.v_proj.bias", l.qkv_bias, c.q_width() + c.kv_width(),
                              c.kv_width()));
    }
    if (c.qk_norm) {
      out.push_back(tensor_bytes(p + "self_attn.q_norm.weight", l.q_norm));
      out.push_back(tensor_bytes(p + "self_attn.k_norm.weight", l.k_norm));
    }
    out.push_back(tensor_bytes(p + "self_attn.o_proj.weight", l.o_proj));
    out.push_back(row_slice(p + "mlp.gate_proj.weight", l.gate_up_proj, 0, c.intermediate_size));
    out.push_back(row_slice(p + "mlp.up_proj.weight", l.gate_up_proj, c.intermediate_size,
                            c.intermediate_size));
    out.push_back(tensor_bytes(p + "mlp.down_proj.weight", l.down_proj));
  }
  return out;
}

// Writes `w` as a checkpoint in `dir`: one model.safetensors (shards == 1) or `shards` files
// with model.safetensors.index.json.
inline void export_checkpoint(const ModelWeights& w, const std::string& dir, int shards) {
  write_text(dir + "/config.json", config_json(w.config).dump(2));
  std::vector<TensorBytes> tensors = hf_tensors(w);
  if (shards == 1) {
    write_safetensors(dir + "/model.safetensors", tensors);
    return;
  }
  std::vector<std::vector<TensorBytes>> parts(shards);
  Json weight_map = Json::object();
  for (size_t i = 0; i < tensors.size(); ++i) {
    int shard = int(i % size_t(shards));
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", shard + 1, shards);
    weight_map[tensors[i].name] = name;
    parts[shard].push_back(tensors[i]);
  }
  for (int s = 0; s < shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
    write_safetensors(dir + "/" + name, parts[s]);
  }
  write_text(dir + "/model.safetensors.index.json",
             Json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump(2));
}

}  // namespace gpufrac::engine::test_util
