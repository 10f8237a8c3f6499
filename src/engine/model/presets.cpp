#include "engine/model/presets.h"

#include "common/seeded_random.h"
#include "common/thread_pool.h"

namespace gpufrac::engine {

namespace {

ModelConfig qwen3_base(std::string name) {
  ModelConfig c;
  c.name = std::move(name);
  c.family = ModelFamily::kQwen3;
  c.head_dim = 128;
  c.vocab_size = 151936;
  c.max_position_embeddings = 40960;
  c.rope_theta = 1e6;
  c.rms_norm_eps = 1e-6;
  c.tie_word_embeddings = true;
  c.qk_norm = true;
  c.eos_token_ids = {151645, 151643};
  return c;
}

std::vector<ModelConfig> all_presets() {
  ModelConfig qwen3_4b = qwen3_base("qwen3-4b");
  qwen3_4b.num_layers = 36;
  qwen3_4b.hidden_size = 2560;
  qwen3_4b.num_heads = 32;
  qwen3_4b.num_kv_heads = 8;
  qwen3_4b.intermediate_size = 9728;

  ModelConfig qwen3_0_6b = qwen3_base("qwen3-0.6b");
  qwen3_0_6b.num_layers = 28;
  qwen3_0_6b.hidden_size = 1024;
  qwen3_0_6b.num_heads = 16;
  qwen3_0_6b.num_kv_heads = 8;
  qwen3_0_6b.intermediate_size = 3072;

  ModelConfig tiny = qwen3_base("tiny");
  tiny.num_layers = 2;
  tiny.hidden_size = 64;  // q width 4 x 32 = 128 != hidden, as in the real Qwen3 models
  tiny.num_heads = 4;
  tiny.num_kv_heads = 2;
  tiny.head_dim = 32;
  tiny.intermediate_size = 256;
  return {qwen3_4b, qwen3_0_6b, tiny};
}

// Fills tensors with bf16 values: offset + scale * z, z ~ approximately N(0, 1) (the sum of four
// 16-bit uniforms of one 64-bit hash, centred and scaled). Element i of the tensor named `name`
// depends only on (seed, name, i).
class RandomFiller {
 public:
  RandomFiller(ModelWeights& weights, uint64_t seed, ThreadPool& pool)
      : weights_(weights), seed_(seed), pool_(pool) {}

  HostTensor make(const std::string& name, std::vector<int64_t> shape, float offset, float scale) {
    HostTensor tensor{DType::kBF16, std::move(shape), nullptr};
    auto* out = static_cast<uint16_t*>(weights_.allocate(tensor.bytes()));
    tensor.data = out;
    uint64_t key = splitmix64(seed_ ^ fnv1a(name));
    constexpr float kMean = 2 * 65535.0f, kInvStd = 1.0f / 37837.2f;  // of the 4-uniform sum
    pool_.parallel_for(tensor.numel(), 1 << 16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        uint64_t r = splitmix64(key + uint64_t(i));
        float sum = float(r & 0xffff) + float((r >> 16) & 0xffff) + float((r >> 32) & 0xffff) +
                    float(r >> 48);
        out[i] = float_to_bf16(offset + scale * (sum - kMean) * kInvStd);
      }
    });
    return tensor;
  }

 private:
  ModelWeights& weights_;
  uint64_t seed_;
  ThreadPool& pool_;
};

constexpr float kMatrixScale = 0.02f;
constexpr float kNormScale = 0.1f;

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const ModelConfig& c : all_presets()) names.push_back(c.name);
  return names;
}

std::optional<ModelConfig> find_preset(const std::string& name) {
  for (ModelConfig& c : all_presets()) {
    if (c.name == name) return c;
  }
  return std::nullopt;
}

ModelWeights generate_random_weights(const ModelConfig& config, uint64_t seed, int threads) {
  ThreadPool pool(threads);
  ModelWeights w;
  w.config = config;
  RandomFiller fill(w, seed, pool);
  int64_t hidden = config.hidden_size, vocab = config.vocab_size;
  int64_t qkv = config.q_width() + 2 * int64_t(config.kv_width());
  w.embed_tokens = fill.make("embed_tokens", {vocab, hidden}, 0, kMatrixScale);
  w.final_norm = fill.make("final_norm", {hidden}, 1, kNormScale);
  w.lm_head = config.tie_word_embeddings ? w.embed_tokens
                                         : fill.make("lm_head", {vocab, hidden}, 0, kMatrixScale);
  for (int i = 0; i < config.num_layers; ++i) {
    std::string p = "layers." + std::to_string(i) + ".";
    LayerWeights l;
    l.input_norm = fill.make(p + "input_norm", {hidden}, 1, kNormScale);
    l.qkv_proj = fill.make(p + "qkv_proj", {qkv, hidden}, 0, kMatrixScale);
    if (config.qkv_bias) l.qkv_bias = fill.make(p + "qkv_bias", {qkv}, 0, kMatrixScale);
    if (config.qk_norm) {
      l.q_norm = fill.make(p + "q_norm", {config.head_dim}, 1, kNormScale);
      l.k_norm = fill.make(p + "k_norm", {config.head_dim}, 1, kNormScale);
    }
    l.o_proj = fill.make(p + "o_proj", {hidden, config.q_width()}, 0, kMatrixScale);
    l.post_attention_norm = fill.make(p + "post_attention_norm", {hidden}, 1, kNormScale);
    l.gate_up_proj =
        fill.make(p + "gate_up_proj", {2 * int64_t(config.intermediate_size), hidden}, 0,
                  kMatrixScale);
    l.down_proj = fill.make(p + "down_proj", {hidden, config.intermediate_size}, 0, kMatrixScale);
    w.layers.push_back(std::move(l));
  }
  w.validate();
  return w;
}

}  // namespace gpufrac::engine
