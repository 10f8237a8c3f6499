// Safetensors reading (single, sharded, bf16/fp16/fp32, malformed files) and checkpoint loading
// into fused ModelWeights, on files the test writes itself.
#include "engine/model/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "engine/cpu/cpu_runner.h"
#include "engine/model/model_loader.h"
#include "engine/model/presets.h"
#include "model_test_util.h"

namespace gpufrac::engine {
namespace {

using ::testing::HasSubstr;
using test_util::ScratchDir;
using test_util::TensorBytes;
using test_util::write_safetensors;
using test_util::write_text;

template <typename T>
std::string raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

std::vector<float> as_floats(const HostTensor& t) {
  std::vector<float> out(size_t(t.numel()));
  convert_to_f32(t.data, t.dtype, out.data(), t.numel());
  return out;
}

TEST(Safetensors, ReadsBf16Fp16AndFp32) {
  ScratchDir dir("st");
  std::vector<float> f32 = {1.5f, -2.25f, 3.0f, 0.0f, 1e-3f, -7.0f};
  std::vector<uint16_t> bf16, f16;
  for (float v : f32) {
    bf16.push_back(float_to_bf16(v));
    f16.push_back(float_to_fp16(v));
  }
  write_safetensors(dir.file("a.safetensors"), {{"x.f32", "F32", {2, 3}, raw(f32)},
                                                {"x.bf16", "BF16", {3, 2}, raw(bf16)},
                                                {"x.f16", "F16", {6}, raw(f16)},
                                                {"empty", "F32", {0, 4}, ""}});
  SafetensorsFile file = SafetensorsFile::open(dir.file("a.safetensors"));
  EXPECT_EQ(file.tensor_names().size(), 4u);
  HostTensor t32 = file.tensor("x.f32"), tb = file.tensor("x.bf16"), th = file.tensor("x.f16");
  EXPECT_EQ(t32.dtype, DType::kF32);
  EXPECT_EQ(t32.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(tb.dtype, DType::kBF16);
  EXPECT_EQ(tb.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(th.dtype, DType::kF16);
  EXPECT_EQ(as_floats(t32), f32);
  std::vector<float> from_bf16 = as_floats(tb), from_f16 = as_floats(th);
  for (size_t i = 0; i < f32.size(); ++i) {
    EXPECT_NEAR(from_bf16[i], f32[i], std::abs(f32[i]) * 1e-2) << i;
    EXPECT_NEAR(from_f16[i], f32[i], std::abs(f32[i]) * 1e-3) << i;
  }
  EXPECT_EQ(file.tensor("empty").numel(), 0);
}

TEST(Safetensors, ConvertsScalarsExactlyWhereRepresentable) {
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(-3.5f)), -3.5f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.00390625f)), 1.0f);  // tie -> even
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  EXPECT_EQ(fp16_to_float(float_to_fp16(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(fp16_to_float(float_to_fp16(70000.0f))));
  EXPECT_EQ(fp16_to_float(float_to_fp16(5.960464477539063e-8f)), 5.960464477539063e-8f);
  EXPECT_EQ(fp16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_float(0xc000), -2.0f);
}

// Writes a file whose header is `header` (exactly) followed by `data_bytes` zero bytes.
void write_raw(const std::string& path, const std::string& header, size_t data_bytes,
               uint64_t declared_length = 0) {
  std::ofstream out(path, std::ios::binary);
  uint64_t length = declared_length ? declared_length : header.size();
  for (int i = 0; i < 8; ++i) out.put(char((length >> (8 * i)) & 0xff));
  out << header << std::string(data_bytes, '\0');
}

std::string open_error(const std::string& path) {
  try {
    SafetensorsFile::open(path);
  } catch (const RuntimeFailure& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Safetensors, MalformedFilesGiveOneLineErrorsNamingFileAndTensor) {
  ScratchDir dir("bad");
  std::string path = dir.file("bad.safetensors");
  struct Case {
    std::string header;
    size_t data;
    std::string expected;
  };
  std::vector<Case> cases = {
      {"not json", 0, "header is not JSON"},
      {"[1,2]", 0, "header is not a JSON object"},
      {R"({"w":{"dtype":"F32","shape":[2]}})", 8, "tensor w: header entry needs"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4,
       "tensor w: data_offsets [0, 8] fall outside the data (4 bytes)"},
      {R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8,
       "tensor w: data_offsets span 8 bytes but shape [3] of F32 needs 12"},
      {R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8, "tensor w: unknown dtype"},
      {R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8, "is not a list of sizes"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-1,7]}})", 8, "are not unsigned"},
      {R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8,
       "needs more bytes than the file holds"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       12, "tensor b: data overlaps tensor a"},
  };
  for (const Case& c : cases) {
    write_raw(path, c.header, c.data);
    std::string message = open_error(path);
    EXPECT_THAT(message, HasSubstr(c.expected)) << c.header;
    EXPECT_THAT(message, HasSubstr(path));
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  write_text(path, "abc");
  EXPECT_THAT(open_error(path), HasSubstr("shorter than the 8-byte header length"));
  write_raw(path, "{}", 0, 1000);
  EXPECT_THAT(open_error(path), HasSubstr("header length 1000 exceeds the file"));
  EXPECT_THAT(open_error(dir.file("missing.safetensors")), HasSubstr("cannot open"));
}

TEST(Safetensors, RefusesDtypesTheEngineDoesNotRead) {
  ScratchDir dir("i64");
  write_safetensors(dir.file("a.safetensors"), {{"ids", "I64", {2}, std::string(16, '\0')}});
  SafetensorsFile file = SafetensorsFile::open(dir.file("a.safetensors"));
  try {
    file.tensor("ids");
    FAIL();
  } catch (const RuntimeFailure& e) {
    EXPECT_THAT(e.what(), HasSubstr("tensor ids has dtype I64"));
  }
  EXPECT_THROW(file.tensor("nope"), RuntimeFailure);
}

TEST(Safetensors, ShardedCheckpointFollowsTheIndex) {
  ScratchDir dir("shards");
  std::vector<float> a = {1, 2}, b = {3, 4, 5};
  write_safetensors(dir.file("s1.safetensors"), {{"a", "F32", {2}, raw(a)}});
  write_safetensors(dir.file("s2.safetensors"), {{"b", "F32", {3}, raw(b)}});
  write_text(dir.file("model.safetensors.index.json"),
             R"({"metadata":{},"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})");
  SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(dir.path());
  EXPECT_EQ(as_floats(checkpoint.tensor("a")), a);
  EXPECT_EQ(as_floats(checkpoint.tensor("b")), b);
  EXPECT_EQ(checkpoint.file_of("b"), dir.file("s2.safetensors"));
  EXPECT_EQ(checkpoint.mappings().size(), 2u);
  EXPECT_THAT([&] { checkpoint.tensor("c"); },
              ::testing::ThrowsMessage<RuntimeFailure>(HasSubstr("tensor c is missing")));

  write_text(dir.file("model.safetensors.index.json"),
             R"({"weight_map":{"a":"s1.safetensors","b":"s3.safetensors"}})");
  EXPECT_THAT([&] { SafetensorsCheckpoint::open(dir.path()); },
              ::testing::ThrowsMessage<RuntimeFailure>(
                  HasSubstr("puts tensor b in s3.safetensors, which is not a file")));
  write_text(dir.file("model.safetensors.index.json"),
             R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors"}})");
  EXPECT_THAT([&] { SafetensorsCheckpoint::open(dir.path()); },
              ::testing::ThrowsMessage<RuntimeFailure>(HasSubstr("that file has no such tensor")));
  write_text(dir.file("model.safetensors.index.json"), R"({"metadata":{}})");
  EXPECT_THAT([&] { SafetensorsCheckpoint::open(dir.path()); },
              ::testing::ThrowsMessage<RuntimeFailure>(HasSubstr("'weight_map' is missing")));
}

TEST(Safetensors, DirectoryWithoutWeightsIsAUsageError) {
  ScratchDir dir("empty");
  EXPECT_THROW(SafetensorsCheckpoint::open(dir.path()), UsageError);
}

ModelConfig small_qwen3() {
  ModelConfig c = *find_preset("tiny");
  c.vocab_size = 300;
  c.eos_token_ids = {299};
  return c;
}

void expect_same_bytes(const HostTensor& a, const HostTensor& b, const std::string& what) {
  ASSERT_EQ(a.shape, b.shape) << what;
  ASSERT_EQ(a.dtype, b.dtype) << what;
  EXPECT_EQ(std::memcmp(a.data, b.data, a.bytes()), 0) << what;
}

void expect_same_weights(const ModelWeights& a, const ModelWeights& b) {
  expect_same_bytes(a.embed_tokens, b.embed_tokens, "embed");
  expect_same_bytes(a.final_norm, b.final_norm, "norm");
  expect_same_bytes(a.lm_head, b.lm_head, "lm_head");
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const LayerWeights &x = a.layers[i], &y = b.layers[i];
    expect_same_bytes(x.qkv_proj, y.qkv_proj, "qkv");
    expect_same_bytes(x.gate_up_proj, y.gate_up_proj, "gate_up");
    expect_same_bytes(x.o_proj, y.o_proj, "o");
    expect_same_bytes(x.down_proj, y.down_proj, "down");
    expect_same_bytes(x.input_norm, y.input_norm, "input_norm");
    expect_same_bytes(x.post_attention_norm, y.post_attention_norm, "post_norm");
    if (!x.q_norm.empty()) expect_same_bytes(x.q_norm, y.q_norm, "q_norm");
    if (!x.k_norm.empty()) expect_same_bytes(x.k_norm, y.k_norm, "k_norm");
    if (!x.qkv_bias.empty()) expect_same_bytes(x.qkv_bias, y.qkv_bias, "qkv_bias");
  }
}

TEST(CheckpointLoader, SingleFileRoundTripFusesQkvAndGateUp) {
  ModelWeights original = generate_random_weights(small_qwen3(), 11, 2);
  ScratchDir dir("ckpt");
  test_util::export_checkpoint(original, dir.path(), 1);
  ModelWeights loaded = load_checkpoint_weights(dir.path());
  EXPECT_EQ(loaded.config.num_layers, original.config.num_layers);
  EXPECT_TRUE(loaded.config.qk_norm);
  EXPECT_EQ(loaded.lm_head.data, loaded.embed_tokens.data);  // tied
  expect_same_weights(loaded, original);
}

TEST(CheckpointLoader, ShardedQwen2WithBiasesRoundTrips) {
  ModelConfig c = small_qwen3();
  c.family = ModelFamily::kQwen2;
  c.qk_norm = false;
  c.qkv_bias = true;
  c.tie_word_embeddings = false;
  ModelWeights original = generate_random_weights(c, 12, 2);
  ScratchDir dir("ckpt2");
  test_util::export_checkpoint(original, dir.path(), 3);
  ModelWeights loaded = load_checkpoint_weights(dir.path());
  EXPECT_TRUE(loaded.config.qkv_bias);
  EXPECT_NE(loaded.lm_head.data, loaded.embed_tokens.data);
  expect_same_weights(loaded, original);
}

TEST(CheckpointLoader, MixedDtypesFuseToFp32) {
  ModelWeights original = generate_random_weights(small_qwen3(), 13, 1);
  std::vector<TensorBytes> tensors = test_util::hf_tensors(original);
  for (TensorBytes& t : tensors) {
    if (t.name != "model.layers.0.self_attn.k_proj.weight") continue;
    std::vector<float> values(t.bytes.size() / 2);
    convert_to_f32(t.bytes.data(), DType::kBF16, values.data(), int64_t(values.size()));
    t = {t.name, "F32", t.shape, raw(values)};
  }
  ScratchDir dir("mixed");
  write_text(dir.file("config.json"), test_util::config_json(original.config).dump());
  write_safetensors(dir.file("model.safetensors"), tensors);
  ModelWeights loaded = load_checkpoint_weights(dir.path());
  EXPECT_EQ(loaded.layers[0].qkv_proj.dtype, DType::kF32);
  EXPECT_EQ(loaded.layers[1].qkv_proj.dtype, DType::kBF16);
  EXPECT_EQ(as_floats(loaded.layers[0].qkv_proj), as_floats(original.layers[0].qkv_proj));
}

// Exports `original`, lets `edit` change the tensors, and returns the loader's error.
std::string load_error(const std::function<void(std::vector<TensorBytes>&)>& edit) {
  ModelWeights original = generate_random_weights(small_qwen3(), 14, 1);
  std::vector<TensorBytes> tensors = test_util::hf_tensors(original);
  edit(tensors);
  ScratchDir dir("broken");
  write_text(dir.file("config.json"), test_util::config_json(original.config).dump());
  write_safetensors(dir.file("model.safetensors"), tensors);
  try {
    load_checkpoint_weights(dir.path());
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CheckpointLoader, NamesTheTensorThatIsMissingMisshapenOrUnexpected) {
  auto find = [](std::vector<TensorBytes>& tensors, const std::string& name) -> TensorBytes& {
    for (TensorBytes& t : tensors) {
      if (t.name == name) return t;
    }
    throw std::runtime_error("no " + name);
  };
  EXPECT_THAT(load_error([&](auto& ts) {
                std::erase_if(ts, [](auto& t) { return t.name == "model.layers.1.mlp.up_proj.weight"; });
              }),
              HasSubstr("tensor model.layers.1.mlp.up_proj.weight is missing"));
  EXPECT_THAT(load_error([&](auto& ts) {
                TensorBytes& t = find(ts, "model.layers.0.self_attn.o_proj.weight");
                t.shape = {t.shape[1], t.shape[0]};  // transposed
              }),
              HasSubstr("model.safetensors: tensor model.layers.0.self_attn.o_proj.weight has "
                        "shape [128, 64], config.json implies [64, 128]"));
  EXPECT_THAT(load_error([&](auto& ts) {
                ts.push_back({"model.layers.0.self_attn.o_proj.bias", "BF16", {64},
                              std::string(128, '\0')});
              }),
              HasSubstr("tensor model.layers.0.self_attn.o_proj.bias is not part of a qwen3"));
  EXPECT_THAT(load_error([&](auto& ts) { find(ts, "model.norm.weight").dtype = "I16"; }),
              HasSubstr("tensor model.norm.weight has dtype I16"));
}

TEST(CheckpointLoader, ExportedTinyGivesThePresetsLogits) {
  ModelWeights preset = generate_random_weights(*find_preset("tiny"), 5, 2);
  ScratchDir dir("tiny");
  test_util::export_checkpoint(preset, dir.path(), 2);
  std::vector<int32_t> tokens = {151644, 872, 198, 9707, 151645};
  std::vector<int32_t> blocks = {3, 1};
  std::vector<float> logits[2];
  int i = 0;
  for (ModelWeights weights : {preset, load_model_weights(dir.path(), 0, 2)}) {
    std::unique_ptr<ModelRunner> runner = make_cpu_runner(std::move(weights), 2);
    runner->allocate_kv_cache(4, 4);
    StepBatch batch;
    batch.return_logits = true;
    batch.sequences.push_back({tokens, 0, blocks, true, {}});
    StepResult result;
    runner->forward(batch, result);
    logits[i++] = result.logits;
  }
  EXPECT_EQ(logits[0], logits[1]);
}

TEST(ModelLoader, UnknownModelNamesThePresets) {
  EXPECT_THAT([] { load_model_weights("/no/such/dir", 0, 1); },
              ::testing::ThrowsMessage<UsageError>(
                  HasSubstr("neither a preset (qwen3-4b, qwen3-0.6b, tiny) nor a checkpoint")));
}

}  // namespace
}  // namespace gpufrac::engine
