#include "engine/model/model_config.h"

#include <cmath>
#include <filesystem>
#include <numbers>

#include "common/error.h"
#include "common/json.h"
#include "engine/model/safetensors.h"

namespace gpufrac::engine {

const char* model_family_name(ModelFamily family) {
  switch (family) {
    case ModelFamily::kQwen3:
      return "qwen3";
    case ModelFamily::kQwen2:
      return "qwen2";
    case ModelFamily::kLlama:
      return "llama";
  }
  return "?";
}

namespace {

// Reads typed fields of one JSON object; every error names the source file and the field.
class FieldReader {
 public:
  FieldReader(const Json& object, std::string source, std::string prefix = "")
      : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw UsageError(source_ + ": field '" + prefix_ + field + "' " + problem);
  }

  bool has(const std::string& field) const {
    return object_.contains(field) && !object_.at(field).is_null();
  }

  int64_t positive_int(const std::string& field) const {
    if (!has(field)) fail(field, "is missing (a positive integer)");
    const Json& value = object_.at(field);
    if (!value.is_number_integer() || value.get<int64_t>() <= 0) {
      fail(field, "must be a positive integer, got " + value.dump());
    }
    return value.get<int64_t>();
  }
  int64_t positive_int(const std::string& field, int64_t fallback) const {
    return has(field) ? positive_int(field) : fallback;
  }

  double positive_number(const std::string& field) const {
    if (!has(field)) fail(field, "is missing (a positive number)");
    const Json& value = object_.at(field);
    if (!value.is_number() || !(value.get<double>() > 0)) {
      fail(field, "must be a positive number, got " + value.dump());
    }
    return value.get<double>();
  }
  double positive_number(const std::string& field, double fallback) const {
    return has(field) ? positive_number(field) : fallback;
  }

  bool boolean(const std::string& field, bool fallback) const {
    if (!has(field)) return fallback;
    const Json& value = object_.at(field);
    if (!value.is_boolean()) fail(field, "must be true or false, got " + value.dump());
    return value.get<bool>();
  }

  std::string string(const std::string& field, const std::string& fallback) const {
    if (!has(field)) return fallback;
    const Json& value = object_.at(field);
    if (!value.is_string()) fail(field, "must be a string, got " + value.dump());
    return value.get<std::string>();
  }

  // An int or a list of ints (eos_token_id); absent -> empty.
  std::vector<int32_t> token_ids(const std::string& field) const {
    std::vector<int32_t> ids;
    if (!has(field)) return ids;
    const Json& value = object_.at(field);
    auto take = [&](const Json& id) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        fail(field, "must be a token id or a list of token ids, got " + value.dump());
      }
      ids.push_back(int32_t(id.get<int64_t>()));
    };
    if (value.is_array()) {
      for (const Json& id : value) take(id);
    } else {
      take(value);
    }
    return ids;
  }

 private:
  const Json& object_;
  std::string source_;
  std::string prefix_;
};

ModelFamily family_of(const FieldReader& fields, const Json& config) {
  std::string type = fields.string("model_type", "");
  if (type.empty() && config.contains("architectures") && config["architectures"].is_array() &&
      !config["architectures"].empty() && config["architectures"][0].is_string()) {
    std::string arch = config["architectures"][0].get<std::string>();
    if (arch == "Qwen3ForCausalLM") type = "qwen3";
    if (arch == "Qwen2ForCausalLM") type = "qwen2";
    if (arch == "LlamaForCausalLM") type = "llama";
  }
  if (type == "qwen3") return ModelFamily::kQwen3;
  if (type == "qwen2") return ModelFamily::kQwen2;
  if (type == "llama") return ModelFamily::kLlama;
  fields.fail("model_type", "must be \"qwen3\", \"qwen2\" or \"llama\" (dense decoders), got \"" +
                                type + "\"");
}

// rope_theta and rope_scaling, from the classic top-level fields or from transformers 5's
// "rope_parameters" object.
void read_rope(const Json& config, const std::string& source, ModelConfig& out) {
  FieldReader top(config, source);
  out.rope_theta = top.positive_number("rope_theta", 10000);
  const char* scaling_field = "rope_scaling";
  if (top.has("rope_parameters")) scaling_field = "rope_parameters";
  if (!top.has(scaling_field)) return;
  const Json& scaling = config.at(scaling_field);
  if (!scaling.is_object()) top.fail(scaling_field, "must be an object or null");
  FieldReader fields(scaling, source, std::string(scaling_field) + ".");
  if (fields.has("rope_theta")) out.rope_theta = fields.positive_number("rope_theta");
  std::string type = fields.string("rope_type", fields.string("type", "default"));
  if (type == "default") return;
  if (type != "llama3") {
    fields.fail("rope_type", "must be \"default\" or \"llama3\", got \"" + type + "\"");
  }
  RopeScaling& rs = out.rope_scaling;
  rs.factor = fields.positive_number("factor");
  rs.low_freq_factor = fields.positive_number("low_freq_factor", 1);
  rs.high_freq_factor = fields.positive_number("high_freq_factor", 4);
  rs.original_max_position_embeddings = int(fields.positive_int("original_max_position_embeddings"));
  if (rs.high_freq_factor <= rs.low_freq_factor) {
    fields.fail("high_freq_factor", "must be greater than low_freq_factor");
  }
}

}  // namespace

ModelConfig parse_model_config(const std::string& config_json_text, const std::string& name,
                               const std::string& source) {
  Json config;
  try {
    config = Json::parse(config_json_text);
  } catch (const Json::exception& e) {
    throw UsageError(source + ": not valid JSON (" + e.what() + ")");
  }
  if (!config.is_object()) throw UsageError(source + ": must be a JSON object");
  FieldReader fields(config, source);

  ModelConfig out;
  out.name = name;
  out.family = family_of(fields, config);
  out.hidden_size = int(fields.positive_int("hidden_size"));
  out.num_layers = int(fields.positive_int("num_hidden_layers"));
  out.num_heads = int(fields.positive_int("num_attention_heads"));
  out.num_kv_heads = int(fields.positive_int("num_key_value_heads", out.num_heads));
  if (out.num_heads % out.num_kv_heads != 0) {
    fields.fail("num_key_value_heads", "must divide num_attention_heads (" +
                                           std::to_string(out.num_heads) + "), got " +
                                           std::to_string(out.num_kv_heads));
  }
  if (!fields.has("head_dim") && out.hidden_size % out.num_heads != 0) {
    fields.fail("head_dim", "is missing and hidden_size is not a multiple of num_attention_heads");
  }
  out.head_dim = int(fields.positive_int("head_dim", out.hidden_size / out.num_heads));
  if (out.head_dim % 2 != 0) fields.fail("head_dim", "must be even (RoPE rotates halves)");
  out.intermediate_size = int(fields.positive_int("intermediate_size"));
  out.vocab_size = int(fields.positive_int("vocab_size"));
  out.max_position_embeddings = int(fields.positive_int("max_position_embeddings"));
  out.rms_norm_eps = fields.positive_number("rms_norm_eps", 1e-6);
  out.tie_word_embeddings = fields.boolean("tie_word_embeddings", false);
  read_rope(config, source, out);

  std::string activation = fields.string("hidden_act", "silu");
  if (activation != "silu") fields.fail("hidden_act", "must be \"silu\", got \"" + activation + "\"");
  if (fields.boolean("use_sliding_window", false)) {
    fields.fail("use_sliding_window", "must be false: sliding-window attention is not supported");
  }
  if (fields.boolean("mlp_bias", false)) fields.fail("mlp_bias", "must be false (no MLP biases)");
  // Qwen2 always has q/k/v biases (and no flag for them); attention_bias elsewhere adds an o_proj
  // bias too, which no supported model has.
  if (out.family != ModelFamily::kQwen2 && fields.boolean("attention_bias", false)) {
    fields.fail("attention_bias", "must be false: only Qwen2's q/k/v biases are supported");
  }
  out.qk_norm = out.family == ModelFamily::kQwen3;
  out.qkv_bias = out.family == ModelFamily::kQwen2;
  out.eos_token_ids = fields.token_ids("eos_token_id");
  for (int32_t id : out.eos_token_ids) {
    if (id >= out.vocab_size) {
      fields.fail("eos_token_id", std::to_string(id) + " is outside the vocabulary (vocab_size " +
                                      std::to_string(out.vocab_size) + ")");
    }
  }
  return out;
}

ModelConfig load_model_config(const std::string& checkpoint_dir) {
  namespace fs = std::filesystem;
  fs::path dir(checkpoint_dir);
  fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path)) {
    throw UsageError(checkpoint_dir + ": no config.json here (a checkpoint directory holds "
                     "config.json and model.safetensors or model.safetensors.index.json)");
  }
  std::string name = fs::absolute(dir).lexically_normal().filename().string();
  if (name.empty()) name = fs::absolute(dir).lexically_normal().parent_path().filename().string();
  ModelConfig config =
      parse_model_config(read_small_file(config_path.string()), name, config_path.string());
  fs::path generation_path = dir / "generation_config.json";
  if (fs::exists(generation_path)) {
    Json generation;
    try {
      generation = Json::parse(read_small_file(generation_path.string()));
    } catch (const Json::exception& e) {
      throw UsageError(generation_path.string() + ": not valid JSON (" + e.what() + ")");
    }
    if (generation.is_object()) {
      for (int32_t id : FieldReader(generation, generation_path.string()).token_ids("eos_token_id")) {
        bool known = false;
        for (int32_t have : config.eos_token_ids) known = known || have == id;
        if (!known && id < config.vocab_size) config.eos_token_ids.push_back(id);
      }
    }
  }
  return config;
}

std::vector<double> rope_inverse_frequencies(const ModelConfig& config) {
  int half = config.head_dim / 2;
  std::vector<double> inv_freq(half);
  for (int i = 0; i < half; ++i) {
    inv_freq[i] = std::pow(config.rope_theta, -2.0 * i / config.head_dim);
  }
  const RopeScaling& rs = config.rope_scaling;
  if (rs.factor <= 0) return inv_freq;
  // Llama 3.1: long wavelengths are slowed by `factor`, short ones kept, the band between blended.
  double old_context = rs.original_max_position_embeddings;
  double low_freq_wavelen = old_context / rs.low_freq_factor;
  double high_freq_wavelen = old_context / rs.high_freq_factor;
  for (double& freq : inv_freq) {
    double wavelen = 2 * std::numbers::pi / freq;
    if (wavelen < high_freq_wavelen) continue;
    if (wavelen > low_freq_wavelen) {
      freq /= rs.factor;
      continue;
    }
    double smooth =
        (old_context / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
    freq = (1 - smooth) * freq / rs.factor + smooth * freq;
  }
  return inv_freq;
}

}  // namespace gpufrac::engine
