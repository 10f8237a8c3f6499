// GPU tests (label gpu) of single CUDA-runner parts: the on-GPU preset generator (bit-identical to
// the host's) and the GPU sampler's distribution (greedy ties, suppression, temperature, top-k,
// top-p), checked against exact probabilities computed here; every batch is also sampled with
// the split scan, which must pick the same ids as one block per row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/device_weights.h"
#include "engine/cuda/gpu_sampler.h"
#include "engine/model/presets.h"

namespace gpufrac::engine {
namespace {

// --- Preset weights generated on the GPU ---------------------------------------------------

std::vector<uint16_t> download_bf16(const bf16* device, int64_t count) {
  std::vector<uint16_t> host(static_cast<size_t>(count));
  GPUFRAC_CUDA_CHECK(cudaMemcpy(host.data(), device, size_t(count) * 2, cudaMemcpyDeviceToHost));
  return host;
}

std::vector<float> download_f32(const float* device, int64_t count) {
  std::vector<float> host(static_cast<size_t>(count));
  GPUFRAC_CUDA_CHECK(cudaMemcpy(host.data(), device, size_t(count) * 4, cudaMemcpyDeviceToHost));
  return host;
}

void expect_same_matrix(const HostTensor& host, const bf16* device, const char* what) {
  std::vector<uint16_t> got = download_bf16(device, host.numel());
  EXPECT_EQ(0, std::memcmp(got.data(), host.data, size_t(host.bytes()))) << what;
}

void expect_same_vector(const HostTensor& host, const float* device, const char* what) {
  std::vector<float> got = download_f32(device, host.numel());
  const auto* bits = static_cast<const uint16_t*>(host.data);
  for (int64_t i = 0; i < host.numel(); ++i) {
    ASSERT_EQ(got[size_t(i)], bf16_to_float(bits[i])) << what << " element " << i;
  }
}

void expect_generated_equals_host(const ModelConfig& config, uint64_t seed) {
  ModelWeights host = generate_random_weights(config, seed, 0);
  DeviceWeights device = DeviceWeights::generate(config, seed);
  expect_same_matrix(host.embed_tokens, device.embed_tokens, "embed_tokens");
  expect_same_matrix(host.lm_head, device.lm_head, "lm_head");
  expect_same_vector(host.final_norm, device.final_norm, "final_norm");
  for (size_t i = 0; i < host.layers.size(); ++i) {
    const LayerWeights& h = host.layers[i];
    const DeviceLayerWeights& d = device.layers[i];
    expect_same_vector(h.input_norm, d.input_norm, "input_norm");
    expect_same_matrix(h.qkv_proj, d.qkv_proj, "qkv_proj");
    if (config.qkv_bias) expect_same_vector(h.qkv_bias, d.qkv_bias, "qkv_bias");
    if (config.qk_norm) {
      expect_same_vector(h.q_norm, d.q_norm, "q_norm");
      expect_same_vector(h.k_norm, d.k_norm, "k_norm");
    }
    expect_same_matrix(h.o_proj, d.o_proj, "o_proj");
    expect_same_vector(h.post_attention_norm, d.post_attention_norm, "post_attention_norm");
    expect_same_matrix(h.gate_up_proj, d.gate_up_proj, "gate_up_proj");
    expect_same_matrix(h.down_proj, d.down_proj, "down_proj");
  }
}

TEST(CudaWeights, GeneratedPresetIsBitIdenticalToHostPreset) {
  expect_generated_equals_host(*find_preset("tiny"), 7);
}

TEST(CudaWeights, GeneratedUntiedBiasedModelIsBitIdenticalToHost) {
  ModelConfig config = *find_preset("tiny");
  config.family = ModelFamily::kQwen2;
  config.tie_word_embeddings = false;
  config.qk_norm = false;
  config.qkv_bias = true;
  expect_generated_equals_host(config, 11);
}

TEST(CudaWeights, UploadKeepsBf16Bits) {
  ModelWeights host = generate_random_weights(*find_preset("tiny"), 3, 0);
  DeviceWeights device = DeviceWeights::upload(host);
  expect_same_matrix(host.embed_tokens, device.embed_tokens, "embed_tokens");
  expect_same_matrix(host.layers[1].down_proj, device.layers[1].down_proj, "down_proj");
  expect_same_vector(host.layers[0].q_norm, device.layers[0].q_norm, "q_norm");
  EXPECT_EQ(device.lm_head, device.embed_tokens);  // tied: one copy
}

// --- The GPU sampler ------------------------------------------------------------------------

struct RowParams {
  float temperature = 0;
  int32_t top_k = 0;
  float top_p = 1;
  uint64_t seed = 0;
  std::vector<int32_t> suppressed;
};

// Uploads `rows` rows of logits with their parameters and returns the sampled ids. Samples
// every batch twice, with one block per row and with the split scan (gpu_sampler.h), which must
// pick the same ids.
std::vector<int32_t> sample(const std::vector<float>& logits, int vocab,
                            const std::vector<RowParams>& rows) {
  const int n = int(rows.size());
  std::vector<float> temperature, top_p;
  std::vector<int32_t> top_k, suppressed_start, suppressed_ids;
  std::vector<uint64_t> seed;
  std::vector<int64_t> generated(size_t(n), 0);
  for (const RowParams& r : rows) {
    temperature.push_back(r.temperature);
    top_k.push_back(r.top_k);
    top_p.push_back(r.top_p);
    seed.push_back(r.seed);
    suppressed_start.push_back(int32_t(suppressed_ids.size()));
    suppressed_ids.insert(suppressed_ids.end(), r.suppressed.begin(), r.suppressed.end());
  }
  suppressed_start.push_back(int32_t(suppressed_ids.size()));
  suppressed_ids.push_back(-1);  // never empty
  std::vector<DeviceBuffer> keep;
  auto put = [&](const void* data, size_t bytes) {
    keep.emplace_back(bytes, "test input");
    GPUFRAC_CUDA_CHECK(cudaMemcpy(keep.back().data(), data, bytes, cudaMemcpyHostToDevice));
    return keep.back().data();
  };
  StepArrays a;
  const float* d_logits = static_cast<const float*>(put(logits.data(), logits.size() * 4));
  a.temperature = static_cast<const float*>(put(temperature.data(), size_t(n) * 4));
  a.top_k = static_cast<const int32_t*>(put(top_k.data(), size_t(n) * 4));
  a.top_p = static_cast<const float*>(put(top_p.data(), size_t(n) * 4));
  a.seed = static_cast<const uint64_t*>(put(seed.data(), size_t(n) * 8));
  a.generated = static_cast<const int64_t*>(put(generated.data(), size_t(n) * 8));
  a.suppressed_start =
      static_cast<const int32_t*>(put(suppressed_start.data(), suppressed_start.size() * 4));
  a.suppressed_ids =
      static_cast<const int32_t*>(put(suppressed_ids.data(), suppressed_ids.size() * 4));
  DeviceBuffer out(size_t(n) * 4, "sampled"), split_out(size_t(n) * 4, "sampled (split)");
  DeviceBuffer scratch(sampler_split_scratch_bytes(n), "sampler scratch");
  launch_sampler(d_logits, n, vocab, a, out.as<int32_t>(), nullptr);
  launch_sampler(d_logits, n, vocab, a, split_out.as<int32_t>(), nullptr, scratch.data());
  std::vector<int32_t> ids(static_cast<size_t>(n)), split_ids(static_cast<size_t>(n));
  GPUFRAC_CUDA_CHECK(cudaMemcpy(ids.data(), out.data(), size_t(n) * 4, cudaMemcpyDeviceToHost));
  GPUFRAC_CUDA_CHECK(
      cudaMemcpy(split_ids.data(), split_out.data(), size_t(n) * 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(ids, split_ids) << "the split scan picked other ids than one block per row";
  return ids;
}

// Softmax of logits / temperature restricted to `allowed` (others get 0).
std::vector<double> probabilities(const std::vector<float>& logits, float temperature,
                                  const std::vector<bool>& allowed) {
  double max_z = -INFINITY;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (allowed[i]) max_z = std::max(max_z, double(logits[i]) / temperature);
  }
  std::vector<double> p(logits.size(), 0.0);
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (allowed[i]) total += p[i] = std::exp(double(logits[i]) / temperature - max_z);
  }
  for (double& x : p) x /= total;
  return p;
}

// Draws `draws` samples (one row per seed) and returns the total variation distance between
// their frequencies and `expected`; every draw must have positive expected probability.
double sampled_distance(const std::vector<float>& row, const RowParams& params,
                        const std::vector<double>& expected, int draws) {
  const int vocab = int(row.size());
  std::vector<float> logits;
  std::vector<RowParams> rows;
  for (int d = 0; d < draws; ++d) {
    logits.insert(logits.end(), row.begin(), row.end());
    rows.push_back(params);
    rows.back().seed = uint64_t(d) * 7919 + 17;
  }
  std::vector<int32_t> ids = sample(logits, vocab, rows);
  std::vector<double> frequency(size_t(vocab), 0.0);
  for (int32_t id : ids) {
    EXPECT_TRUE(id >= 0 && id < vocab && expected[size_t(id)] > 0) << "sampled id " << id;
    if (id >= 0 && id < vocab) frequency[size_t(id)] += 1.0 / draws;
  }
  double distance = 0;
  for (int i = 0; i < vocab; ++i) distance += 0.5 * std::fabs(frequency[size_t(i)] - expected[size_t(i)]);
  return distance;
}

std::vector<float> normal_logits(int vocab, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, stddev);
  std::vector<float> row(static_cast<size_t>(vocab));
  for (float& x : row) x = normal(rng);
  return row;
}

TEST(CudaSampler, GreedyTakesLowestIdAmongTiesAndSkipsSuppressedAndNonFinite) {
  const int vocab = 151936;
  std::vector<float> row = normal_logits(vocab, 1, 1);
  row[777] = 50;
  row[1234] = 50;
  row[99] = NAN;
  row[100] = INFINITY;
  std::vector<float> logits = row;
  logits.insert(logits.end(), row.begin(), row.end());
  std::vector<float> all_excluded(size_t(vocab), -INFINITY);
  logits.insert(logits.end(), all_excluded.begin(), all_excluded.end());
  RowParams suppress;
  suppress.suppressed = {777, 5};
  std::vector<int32_t> ids = sample(logits, vocab, {RowParams{}, suppress, RowParams{}});
  EXPECT_EQ(ids[0], 777);
  EXPECT_EQ(ids[1], 1234);
  EXPECT_EQ(ids[2], -1);
}

TEST(CudaSampler, TemperatureMatchesSoftmax) {
  std::vector<float> row = normal_logits(16, 1.5f, 2);
  RowParams params;
  params.temperature = 0.8f;
  std::vector<double> expected = probabilities(row, 0.8f, std::vector<bool>(16, true));
  double distance = sampled_distance(row, params, expected, 16384);
  std::printf("temperature 0.8 over 16 ids: total variation %.4f\n", distance);
  EXPECT_LT(distance, 0.04);
}

TEST(CudaSampler, TopKKeepsTheKLargestAndRenormalises) {
  const int vocab = 1000, k = 10;
  std::vector<float> row = normal_logits(vocab, 2, 3);
  std::vector<float> sorted = row;
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  std::vector<bool> allowed(static_cast<size_t>(vocab));
  for (int i = 0; i < vocab; ++i) allowed[size_t(i)] = row[size_t(i)] >= sorted[k - 1];
  RowParams params;
  params.temperature = 1;
  params.top_k = k;
  double distance = sampled_distance(row, params, probabilities(row, 1, allowed), 16384);
  std::printf("top-k 10 of 1000: total variation %.4f\n", distance);
  EXPECT_LT(distance, 0.04);
}

TEST(CudaSampler, TopPKeepsTheSmallestNucleusAndRenormalises) {
  const int vocab = 1000;
  const float temperature = 0.5f, top_p = 0.6f;
  std::vector<float> row = normal_logits(vocab, 1, 4);
  std::vector<double> p = probabilities(row, temperature, std::vector<bool>(size_t(vocab), true));
  std::vector<int> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return p[size_t(a)] > p[size_t(b)]; });
  std::vector<bool> allowed(size_t(vocab), false);
  double mass = 0;
  for (int id : order) {
    allowed[size_t(id)] = true;
    mass += p[size_t(id)];
    if (mass >= top_p) break;
  }
  RowParams params;
  params.temperature = temperature;
  params.top_p = top_p;
  double distance = sampled_distance(row, params, probabilities(row, temperature, allowed), 16384);
  std::printf("top-p 0.6 at temperature 0.5 over 1000 ids: total variation %.4f\n", distance);
  EXPECT_LT(distance, 0.04);
}

TEST(CudaSampler, TopKThenTopPOnAFullVocabularyStaysInTheCandidateSet) {
  const int vocab = 151936, k = 50;
  const float top_p = 0.9f;
  std::vector<float> row = normal_logits(vocab, 3, 5);
  std::vector<float> sorted = row;
  std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<float>());
  std::vector<bool> in_top_k(static_cast<size_t>(vocab));
  for (int i = 0; i < vocab; ++i) in_top_k[size_t(i)] = row[size_t(i)] >= sorted[k - 1];
  std::vector<double> p = probabilities(row, 1, in_top_k);
  std::vector<int> order;
  for (int i = 0; i < vocab; ++i) {
    if (in_top_k[size_t(i)]) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) { return p[size_t(a)] > p[size_t(b)]; });
  std::vector<bool> allowed(size_t(vocab), false);
  double mass = 0;
  for (int id : order) {
    allowed[size_t(id)] = true;
    mass += p[size_t(id)];
    if (mass >= top_p) break;
  }
  RowParams params;
  params.temperature = 1;
  params.top_k = k;
  params.top_p = top_p;
  double distance = sampled_distance(row, params, probabilities(row, 1, allowed), 2048);
  std::printf("top-k 50 + top-p 0.9 over 151936 ids: total variation %.4f\n", distance);
  EXPECT_LT(distance, 0.1);
}

}  // namespace
}  // namespace gpufrac::engine
