// config.json parsing for the three families, rope scaling, and errors that name the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "common/error.h"
#include "engine/model/model_config.h"
#include "engine/model/presets.h"
#include "model_test_util.h"

namespace gpufrac::engine {
namespace {

// Qwen/Qwen3-4B config.json as published (fields the engine ignores included).
const char* kQwen3_4b = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 2560, "initializer_range": 0.02, "intermediate_size": 9728,
  "max_position_embeddings": 40960, "max_window_layers": 36, "model_type": "qwen3",
  "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

// Qwen/Qwen2.5-0.5B-Instruct config.json.
const char* kQwen2 = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 21,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
  "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

// meta-llama/Llama-3.2-1B-Instruct config.json.
const char* kLlama = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "head_dim": 64,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": false,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "use_cache": true, "vocab_size": 128256})";

TEST(ModelConfig, ParsesQwen3) {
  ModelConfig c = parse_model_config(kQwen3_4b, "Qwen3-4B");
  EXPECT_EQ(c.name, "Qwen3-4B");
  EXPECT_EQ(c.family, ModelFamily::kQwen3);
  EXPECT_EQ(c.num_layers, 36);
  EXPECT_EQ(c.hidden_size, 2560);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.q_width(), 4096);  // not hidden_size
  EXPECT_EQ(c.kv_width(), 1024);
  EXPECT_EQ(c.intermediate_size, 9728);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.factor, 0);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{151645});
}

TEST(ModelConfig, MatchesThePresetShapes) {
  ModelConfig parsed = parse_model_config(kQwen3_4b, "x");
  ModelConfig preset = *find_preset("qwen3-4b");
  EXPECT_EQ(parsed.num_layers, preset.num_layers);
  EXPECT_EQ(parsed.hidden_size, preset.hidden_size);
  EXPECT_EQ(parsed.num_heads, preset.num_heads);
  EXPECT_EQ(parsed.num_kv_heads, preset.num_kv_heads);
  EXPECT_EQ(parsed.head_dim, preset.head_dim);
  EXPECT_EQ(parsed.intermediate_size, preset.intermediate_size);
  EXPECT_EQ(parsed.vocab_size, preset.vocab_size);
  EXPECT_EQ(parsed.rope_theta, preset.rope_theta);
  EXPECT_EQ(parsed.tie_word_embeddings, preset.tie_word_embeddings);
}

TEST(ModelConfig, ParsesQwen2WithBiasesAndDerivedHeadDim) {
  ModelConfig c = parse_model_config(kQwen2, "q2");
  EXPECT_EQ(c.family, ModelFamily::kQwen2);
  EXPECT_EQ(c.head_dim, 64);  // 896 / 14: Qwen2 has no head_dim field
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_TRUE(c.tie_word_embeddings);
}

TEST(ModelConfig, ParsesLlamaWithRopeScaling) {
  ModelConfig c = parse_model_config(kLlama, "llama");
  EXPECT_EQ(c.family, ModelFamily::kLlama);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.rope_theta, 500000);
  EXPECT_EQ(c.rope_scaling.factor, 32);
  EXPECT_EQ(c.rope_scaling.low_freq_factor, 1);
  EXPECT_EQ(c.rope_scaling.high_freq_factor, 4);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{128001, 128008, 128009}));
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias);
}

TEST(ModelConfig, RopeFrequenciesWithoutScaling) {
  ModelConfig c = parse_model_config(kQwen3_4b, "x");
  std::vector<double> f = rope_inverse_frequencies(c);
  ASSERT_EQ(f.size(), 64u);
  EXPECT_DOUBLE_EQ(f[0], 1.0);
  EXPECT_NEAR(f[1], std::pow(1e6, -2.0 / 128), 1e-15);
  EXPECT_NEAR(f[63], std::pow(1e6, -126.0 / 128), 1e-18);
}

TEST(ModelConfig, RopeFrequenciesWithLlama3Scaling) {
  ModelConfig c = parse_model_config(kLlama, "x");
  std::vector<double> f = rope_inverse_frequencies(c);
  ASSERT_EQ(f.size(), 32u);
  // Wavelength 2 pi / f against 8192 / 4 = 2048 (kept) and 8192 / 1 (divided by 32).
  for (int i = 0; i < 32; ++i) {
    double base = std::pow(500000.0, -2.0 * i / 64);
    double wavelen = 2 * std::numbers::pi / base;
    if (wavelen < 2048) {
      EXPECT_DOUBLE_EQ(f[i], base) << i;
    } else if (wavelen > 8192) {
      EXPECT_DOUBLE_EQ(f[i], base / 32) << i;
    } else {
      double smooth = (8192 / wavelen - 1) / 3;
      EXPECT_NEAR(f[i], (1 - smooth) * base / 32 + smooth * base, 1e-15) << i;
      EXPECT_LT(f[i], base);
      EXPECT_GT(f[i], base / 32);
    }
  }
  EXPECT_DOUBLE_EQ(f[0], 1.0);                                   // high frequency: unchanged
  EXPECT_DOUBLE_EQ(f[31], std::pow(500000.0, -62.0 / 64) / 32);  // low frequency: / factor
}

TEST(ModelConfig, ReadsTransformers5RopeParameters) {
  Json j = Json::parse(kLlama);
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0},
                          {"original_max_position_embeddings", 8192}};
  ModelConfig c = parse_model_config(j.dump(), "x");
  EXPECT_EQ(c.rope_theta, 500000);
  EXPECT_EQ(c.rope_scaling.factor, 8);
}

TEST(ModelConfig, DefaultsWhenOptionalFieldsAreAbsent) {
  Json j = Json::parse(kQwen2);
  for (const char* field : {"num_key_value_heads", "rope_theta", "rms_norm_eps",
                            "tie_word_embeddings", "hidden_act", "eos_token_id"}) {
    j.erase(field);
  }
  ModelConfig c = parse_model_config(j.dump(), "x");
  EXPECT_EQ(c.num_kv_heads, 14);
  EXPECT_EQ(c.rope_theta, 10000);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_TRUE(c.eos_token_ids.empty());
}

// Applies `edit` to a copy of `base`, parses it, and returns the UsageError's message.
std::string error_of(const char* base, const std::function<void(Json&)>& edit) {
  Json j = Json::parse(base);
  edit(j);
  try {
    parse_model_config(j.dump(), "x", "/models/x/config.json");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ModelConfig, ErrorsNameTheFileAndField) {
  using ::testing::HasSubstr;
  struct Case {
    const char* base;
    std::function<void(Json&)> edit;
    const char* expected;
  };
  std::vector<Case> cases = {
      {kQwen3_4b, [](Json& j) { j.erase("hidden_size"); }, "'hidden_size' is missing"},
      {kQwen3_4b, [](Json& j) { j["hidden_size"] = "2560"; }, "'hidden_size' must be a positive"},
      {kQwen3_4b, [](Json& j) { j["num_hidden_layers"] = 0; }, "'num_hidden_layers' must be"},
      {kQwen3_4b, [](Json& j) { j["num_attention_heads"] = -4; }, "'num_attention_heads'"},
      {kQwen3_4b, [](Json& j) { j["vocab_size"] = 1.5; }, "'vocab_size' must be a positive"},
      {kQwen3_4b, [](Json& j) { j["model_type"] = "mistral"; }, "'model_type' must be"},
      {kQwen3_4b, [](Json& j) { j["num_key_value_heads"] = 5; }, "'num_key_value_heads' must divide"},
      {kQwen3_4b, [](Json& j) { j["head_dim"] = 127; }, "'head_dim' must be even"},
      {kQwen3_4b, [](Json& j) { j["rope_theta"] = "big"; }, "'rope_theta' must be a positive"},
      {kQwen3_4b, [](Json& j) { j["rms_norm_eps"] = 0; }, "'rms_norm_eps' must be a positive"},
      {kQwen3_4b, [](Json& j) { j["tie_word_embeddings"] = 1; }, "'tie_word_embeddings' must be"},
      {kQwen3_4b, [](Json& j) { j["hidden_act"] = "gelu"; }, "'hidden_act' must be \"silu\""},
      {kQwen3_4b, [](Json& j) { j["use_sliding_window"] = true; }, "'use_sliding_window'"},
      {kQwen3_4b, [](Json& j) { j["attention_bias"] = true; }, "'attention_bias' must be false"},
      {kQwen3_4b, [](Json& j) { j["eos_token_id"] = 999999; }, "'eos_token_id' 999999 is outside"},
      {kQwen3_4b, [](Json& j) { j["eos_token_id"] = "x"; }, "'eos_token_id' must be a token id"},
      {kQwen3_4b, [](Json& j) { j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4}}; },
       "'rope_scaling.rope_type' must be \"default\" or \"llama3\""},
      {kQwen3_4b, [](Json& j) { j["rope_scaling"] = 3; }, "'rope_scaling' must be an object"},
      {kLlama, [](Json& j) { j["rope_scaling"].erase("factor"); }, "'rope_scaling.factor' is missing"},
      {kLlama, [](Json& j) { j["rope_scaling"]["original_max_position_embeddings"] = -1; },
       "'rope_scaling.original_max_position_embeddings'"},
      {kLlama, [](Json& j) { j["mlp_bias"] = true; }, "'mlp_bias' must be false"},
      {kLlama, [](Json& j) { j.erase("max_position_embeddings"); }, "'max_position_embeddings'"},
      {kQwen2, [](Json& j) { j["hidden_size"] = 900; }, "'head_dim' is missing"},
  };
  for (const Case& c : cases) {
    std::string message = error_of(c.base, c.edit);
    EXPECT_THAT(message, HasSubstr(c.expected));
    EXPECT_THAT(message, HasSubstr("/models/x/config.json"));
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(ModelConfig, RejectsTextThatIsNotAJsonObject) {
  EXPECT_THROW(parse_model_config("{\"hidden_size\": ", "x"), UsageError);
  EXPECT_THROW(parse_model_config("[1, 2]", "x"), UsageError);
}

TEST(ModelConfig, LoadsDirectoryWithGenerationConfigEos) {
  test_util::ScratchDir dir("config");
  std::string sub = dir.file("Qwen3-4B");
  std::filesystem::create_directories(sub);
  test_util::write_text(sub + "/config.json", kQwen3_4b);
  test_util::write_text(sub + "/generation_config.json",
                      R"({"eos_token_id": [151645, 151643], "top_k": 20})");
  ModelConfig c = load_model_config(sub);
  EXPECT_EQ(c.name, "Qwen3-4B");
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{151645, 151643}));
}

TEST(ModelConfig, MissingConfigJsonSaysWhatADirectoryNeeds) {
  test_util::ScratchDir dir("noconfig");
  try {
    load_model_config(dir.path());
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("no config.json"));
  }
}

}  // namespace
}  // namespace gpufrac::engine
