// Presets: exact shapes of the real models, and seeded weights that are reproducible, independent
// of the thread count, and scaled as documented.
#include "engine/model/presets.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "engine/runner_factory.h"

namespace gpufrac::engine {
namespace {

// Parameters of a dense decoder (the tied lm_head counted once), from its config alone.
int64_t parameter_count(const ModelConfig& c) {
  int64_t h = c.hidden_size, qkv = c.q_width() + 2 * int64_t(c.kv_width());
  int64_t per_layer = 2 * h + qkv * h + h * c.q_width() + 3 * int64_t(c.intermediate_size) * h;
  if (c.qk_norm) per_layer += 2 * c.head_dim;
  int64_t embed = int64_t(c.vocab_size) * h;
  return embed * (c.tie_word_embeddings ? 1 : 2) + h + c.num_layers * per_layer;
}

TEST(Presets, HaveTheRealModelsShapes) {
  EXPECT_EQ(preset_names(), (std::vector<std::string>{"qwen3-4b", "qwen3-0.6b", "tiny"}));
  ModelConfig big = *find_preset("qwen3-4b");
  EXPECT_EQ(big.num_layers, 36);
  EXPECT_EQ(big.hidden_size, 2560);
  EXPECT_EQ(big.q_width(), 4096);
  EXPECT_EQ(big.kv_width(), 1024);
  EXPECT_EQ(big.intermediate_size, 9728);
  // Qwen3 config.json shapes: 4.02B parameters, 8.05 GB in bf16; 596.0M and 1.19 GB for 0.6B.
  EXPECT_NEAR(double(parameter_count(big)), 4.02e9, 0.005e9);
  EXPECT_NEAR(2.0 * double(parameter_count(big)), 8.05e9, 0.01e9);
  ModelConfig small = *find_preset("qwen3-0.6b");
  EXPECT_EQ(small.num_layers, 28);
  EXPECT_EQ(small.hidden_size, 1024);
  EXPECT_EQ(small.q_width(), 2048);
  EXPECT_EQ(small.intermediate_size, 3072);
  EXPECT_NEAR(double(parameter_count(small)), 596.0e6, 0.05e6);
  for (const std::string& name : preset_names()) {
    ModelConfig c = *find_preset(name);
    EXPECT_EQ(c.vocab_size, 151936) << name;
    EXPECT_EQ(c.rope_theta, 1e6) << name;
    EXPECT_TRUE(c.qk_norm && c.tie_word_embeddings && !c.qkv_bias) << name;
    EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{151645, 151643})) << name;
  }
  EXPECT_FALSE(find_preset("qwen3-8b").has_value());
}

TEST(Presets, TinyIsSmallButSpeaksQwen3Tokens) {
  ModelConfig tiny = *find_preset("tiny");
  EXPECT_EQ(tiny.num_heads, 4);
  EXPECT_EQ(tiny.num_kv_heads, 2);
  EXPECT_EQ(tiny.head_dim, 32);
  EXPECT_NE(tiny.q_width(), tiny.hidden_size);
  ModelWeights w = generate_random_weights(tiny, 0, 2);
  EXPECT_EQ(w.total_bytes(), uint64_t(parameter_count(tiny)) * 2);
  EXPECT_EQ(w.lm_head.data, w.embed_tokens.data);
  EXPECT_EQ(w.embed_tokens.dtype, DType::kBF16);
}

std::vector<float> floats(const HostTensor& t) {
  std::vector<float> out(size_t(t.numel()));
  convert_to_f32(t.data, t.dtype, out.data(), t.numel());
  return out;
}

TEST(Presets, WeightsArePureFunctionsOfTheSeed) {
  ModelConfig tiny = *find_preset("tiny");
  ModelWeights one_thread = generate_random_weights(tiny, 3, 1);
  ModelWeights two_threads = generate_random_weights(tiny, 3, 2);
  ModelWeights other_seed = generate_random_weights(tiny, 4, 2);
  auto same = [](const HostTensor& a, const HostTensor& b) {
    return std::memcmp(a.data, b.data, a.bytes()) == 0;
  };
  EXPECT_TRUE(same(one_thread.embed_tokens, two_threads.embed_tokens));
  EXPECT_TRUE(same(one_thread.layers[1].gate_up_proj, two_threads.layers[1].gate_up_proj));
  EXPECT_FALSE(same(one_thread.embed_tokens, other_seed.embed_tokens));
  // Distinct tensors get distinct values.
  EXPECT_NE(floats(one_thread.layers[0].input_norm), floats(one_thread.layers[1].input_norm));
}

TEST(Presets, ValuesHaveTheDocumentedScale) {
  ModelWeights w = generate_random_weights(*find_preset("tiny"), 9, 2);
  auto moments = [](const std::vector<float>& v) {
    double sum = 0, sum_sq = 0;
    for (float x : v) sum += x;
    double mean = sum / double(v.size());
    for (float x : v) sum_sq += (x - mean) * (x - mean);
    return std::pair{mean, std::sqrt(sum_sq / double(v.size()))};
  };
  auto [embed_mean, embed_std] = moments(floats(w.embed_tokens));
  EXPECT_NEAR(embed_mean, 0, 1e-4);
  EXPECT_NEAR(embed_std, 0.02, 0.0005);
  std::vector<float> norms;
  for (const LayerWeights& l : w.layers) {
    for (const HostTensor* t : {&l.input_norm, &l.post_attention_norm, &l.q_norm, &l.k_norm}) {
      std::vector<float> v = floats(*t);
      norms.insert(norms.end(), v.begin(), v.end());
    }
  }
  auto [norm_mean, norm_std] = moments(norms);
  EXPECT_NEAR(norm_mean, 1, 0.02);
  EXPECT_NEAR(norm_std, 0.1, 0.02);
}

TEST(RunnerFactory, BuildsTheCpuRunnerAndRejectsWhatItCannot) {
  std::unique_ptr<ModelRunner> runner = create_model_runner({"tiny", "cpu", 1, 1});
  EXPECT_EQ(runner->config().name, "tiny");
  EXPECT_NE(runner->device_name().find("cpu"), std::string::npos);
  EXPECT_EQ(create_model_runner({"tiny", "auto", 1, 1})->config().name, "tiny");
  // cuda: a runner where this build and machine have one, else a UsageError that says why.
  try {
    EXPECT_EQ(create_model_runner({"tiny", "cuda", 0, 1})->config().name, "tiny");
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
  EXPECT_THROW(create_model_runner({"tiny", "tpu", 0, 1}), UsageError);
  EXPECT_THROW(create_model_runner({"tiny", "cpu", 0, -1}), UsageError);
  EXPECT_THROW(create_model_runner({"no-such-model", "cpu", 0, 1}), UsageError);
  RunnerOptions mapping_lock_on_the_cpu{"tiny", "cpu", 0, 1};
  mapping_lock_on_the_cpu.kv_map_lock = "/tmp/kv-map.lock";
  try {
    create_model_runner(mapping_lock_on_the_cpu);
    FAIL() << "a CPU runner took --kv-map-lock";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-map-lock"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpufrac::engine
