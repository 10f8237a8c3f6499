// GPU tests (label gpu) of the sampling extras (sampling_extras.h, min-p in gpu_sampler.h)
// against the CPU sampler (sampler.h), on rows packed by StepInputs exactly as the runner packs
// them: logit_bias and penalties (with placeholders counted on the device) then greedy pick the
// CPU's ids and leave the raw logits restored bit for bit; min-p (alone and with top-k / top-p)
// draws only the CPU's candidates, with their probabilities; logprobs equal the CPU's
// token_logprobs() within fp32 noise. Every greedy batch is sampled with and without the split
// scan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/gpu_sampler.h"
#include "engine/cuda/sampling_extras.h"
#include "engine/cuda/step_inputs.h"
#include "engine/model/sampler.h"

namespace gpufrac::engine {
namespace {

// One sample row: its raw logits' parameters, adjustments, and the token its placeholder stands
// for (-1: it feeds a real token).
struct RowSpec {
  SamplingParams params;
  std::vector<LogitAdjustment> adjustments;
  int32_t placeholder = -1;
};

struct GpuResult {
  std::vector<int32_t> ids;
  std::vector<TokenLogprob> logprobs;  // [rows x kLogprobsStride] when a row asked
  std::vector<float> logits_after;     // the logits buffer after the step's kernels
};

// Packs one decode row per spec through StepInputs, uploads `logits` ([rows][vocab]) and runs
// what CudaRunner::enqueue_step runs after the lm_head: adjustments, the sampler, the restore,
// logprobs.
GpuResult run_on_gpu(const std::vector<float>& logits, int vocab, std::vector<RowSpec>& rows,
                     bool split) {
  const int n = int(rows.size());
  StepLimits limits;
  limits.max_tokens = n;
  limits.max_seqs = n;
  limits.max_table_width = 1;
  limits.vocab_size = vocab;
  limits.block_size = 16;
  limits.num_blocks = n;
  StepInputs inputs(limits);
  static const std::vector<int32_t> real_token = {0}, placeholder_token = {-1};
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(n));
  std::vector<int32_t> previous(static_cast<size_t>(n), 0);
  StepBatch batch;
  for (int r = 0; r < n; ++r) {
    tables[size_t(r)] = {r};
    RowSpec& spec = rows[size_t(r)];
    SequenceWork work;
    work.tokens = spec.placeholder >= 0 ? placeholder_token : real_token;
    work.block_table = tables[size_t(r)];
    work.sample = true;
    work.sampling = spec.params;
    work.sampling.adjustments = spec.adjustments;
    work.previous_sample_row = spec.placeholder >= 0 ? r : -1;
    previous[size_t(r)] = std::max(spec.placeholder, 0);
    batch.sequences.push_back(work);
  }
  PackedStep packed = inputs.pack(batch, 0, n);
  inputs.upload(nullptr);

  const uint64_t logit_bytes = logits.size() * 4;
  DeviceBuffer d_logits(logit_bytes, "logits"), d_previous(uint64_t(n) * 4, "previous samples");
  DeviceBuffer d_sampled(uint64_t(n) * 4, "sampled"),
      scratch(sampler_split_scratch_bytes(n), "split");
  DeviceBuffer d_logprobs(uint64_t(n) * kLogprobsStride * sizeof(TokenLogprob), "logprobs");
  GPUFRAC_CUDA_CHECK(
      cudaMemcpy(d_logits.data(), logits.data(), logit_bytes, cudaMemcpyHostToDevice));
  GPUFRAC_CUDA_CHECK(
      cudaMemcpy(d_previous.data(), previous.data(), uint64_t(n) * 4, cudaMemcpyHostToDevice));
  float* device_logits = d_logits.as<float>();
  if (packed.adjusts_logits) {
    launch_logit_adjustments(device_logits, n, vocab, packed.arrays, d_previous.as<int32_t>(),
                             nullptr);
  }
  launch_sampler(device_logits, n, vocab, packed.arrays, d_sampled.as<int32_t>(), nullptr,
                 split ? scratch.data() : nullptr);
  if (packed.adjusts_logits) launch_restore_logits(device_logits, n, vocab, packed.arrays, nullptr);
  if (packed.wants_logprobs) {
    launch_logprobs(device_logits, n, vocab, packed.arrays, d_sampled.as<int32_t>(),
                    d_logprobs.as<TokenLogprob>(), nullptr);
  }
  GPUFRAC_CUDA_CHECK(cudaDeviceSynchronize());
  GpuResult out;
  out.ids.resize(size_t(n));
  out.logits_after.resize(logits.size());
  GPUFRAC_CUDA_CHECK(
      cudaMemcpy(out.ids.data(), d_sampled.data(), uint64_t(n) * 4, cudaMemcpyDeviceToHost));
  GPUFRAC_CUDA_CHECK(
      cudaMemcpy(out.logits_after.data(), d_logits.data(), logit_bytes, cudaMemcpyDeviceToHost));
  if (packed.wants_logprobs) {
    out.logprobs.resize(size_t(n) * kLogprobsStride);
    GPUFRAC_CUDA_CHECK(cudaMemcpy(out.logprobs.data(), d_logprobs.data(),
                                  out.logprobs.size() * sizeof(TokenLogprob),
                                  cudaMemcpyDeviceToHost));
  }
  return out;
}

std::vector<float> normal_logits(int rows, int vocab, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, stddev);
  std::vector<float> logits(size_t(rows) * size_t(vocab));
  for (float& x : logits) x = normal(rng);
  return logits;
}

std::span<const float> row_of(const std::vector<float>& logits, int vocab, int r) {
  return std::span<const float>(logits).subspan(size_t(r) * size_t(vocab), size_t(vocab));
}

// The CPU sampler's view of a row: its parameters with the placeholder resolved.
SamplingParams cpu_params(const RowSpec& spec) {
  SamplingParams p = spec.params;
  p.adjustments = spec.adjustments;
  p.resolved_placeholder = spec.placeholder;
  return p;
}

// The adjusted logit of `id` as the CPU sees it (for telling a near tie from a bug).
float adjusted(std::span<const float> row, const RowSpec& spec, int32_t id) {
  for (const LogitAdjustment& a : spec.adjustments) {
    if (a.id != id) continue;
    int32_t count = a.output_count + (spec.params.penalties.active() && id == spec.placeholder);
    return adjust_logit(row[size_t(id)], a.bias, count, a.in_prompt, spec.params.penalties);
  }
  if (spec.params.penalties.active() && id == spec.placeholder) {
    return adjust_logit(row[size_t(id)], 0, 1, false, spec.params.penalties);
  }
  return row[size_t(id)];
}

// Rows with random logit_bias and penalties that reach the top of each row, half of them feeding
// a placeholder (an adjusted id, the row's argmax, or an id nothing else touches).
std::vector<RowSpec> adjusted_rows(const std::vector<float>& logits, int rows, int vocab,
                                   uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(0, 1);
  std::vector<RowSpec> specs(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    std::span<const float> row = row_of(logits, vocab, r);
    std::vector<int32_t> order(static_cast<size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + 8, order.end(),
                      [&](int32_t a, int32_t b) { return row[size_t(a)] > row[size_t(b)]; });
    RowSpec& spec = specs[size_t(r)];
    spec.params.penalties = {2 * uniform(rng) - 1, 2 * uniform(rng) - 1,
                             0.5f + 1.5f * uniform(rng)};
    if (r % 5 == 0) spec.params.penalties = {};                  // logit_bias alone
    std::vector<int32_t> ids(order.begin(), order.begin() + 6);  // the top, where it matters
    for (int i = 0; i < 40; ++i) ids.push_back(int32_t(rng() % uint32_t(vocab)));
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (int32_t id : ids) {
      spec.adjustments.push_back({id, 6 * uniform(rng) - 3, int32_t(rng() % 4), rng() % 2 == 0});
    }
    if (r % 2 == 1) {
      const int32_t choices[] = {spec.adjustments[size_t(r) % spec.adjustments.size()].id, order[0],
                                 order[7]};
      spec.placeholder = choices[(r / 2) % 3];
    }
  }
  return specs;
}

TEST(CudaSamplingExtras, AdjustmentsThenGreedyPickTheCpuIdsAndRestoreTheRawLogits) {
  const int rows = 24, vocab = 151936;
  std::vector<float> logits = normal_logits(rows, vocab, 2, 1);
  std::vector<RowSpec> specs = adjusted_rows(logits, rows, vocab, 2);
  int changed = 0;
  for (bool split : {false, true}) {
    GpuResult gpu = run_on_gpu(logits, vocab, specs, split);
    EXPECT_EQ(gpu.logits_after, logits) << "the raw logits come back bit for bit";
    for (int r = 0; r < rows; ++r) {
      std::span<const float> row = row_of(logits, vocab, r);
      const RowSpec& spec = specs[size_t(r)];
      const int32_t cpu = sample_token(row, cpu_params(spec));
      const int32_t plain = int32_t(std::max_element(row.begin(), row.end()) - row.begin());
      changed += cpu != plain;
      if (gpu.ids[size_t(r)] == cpu) continue;
      ASSERT_GE(gpu.ids[size_t(r)], 0) << "row " << r;
      EXPECT_NEAR(adjusted(row, spec, gpu.ids[size_t(r)]), adjusted(row, spec, cpu), 1e-5)
          << "row " << r << " split " << split << ": GPU id " << gpu.ids[size_t(r)] << ", CPU "
          << cpu;
    }
  }
  EXPECT_GT(changed, rows / 2) << "the adjustments must move most picks, or this tests nothing";
}

// Exact probabilities the CPU sampler draws from for a temperature row with min-p, top-k and
// top-p (sampler.h: min-p, then top-k, then top-p, renormalised).
std::vector<double> cpu_distribution(std::span<const float> row, const SamplingParams& p) {
  const int vocab = int(row.size());
  const float inv_t = 1.0f / p.temperature;
  const float max_logit = *std::max_element(row.begin(), row.end());
  const float floor = p.min_p > 0 ? max_logit * inv_t + std::log(p.min_p) : -INFINITY;
  std::vector<int32_t> kept;
  for (int i = 0; i < vocab; ++i) {
    if (row[size_t(i)] * inv_t >= floor) kept.push_back(i);
  }
  std::sort(kept.begin(), kept.end(),
            [&](int32_t a, int32_t b) { return row[size_t(a)] > row[size_t(b)]; });
  if (p.top_k > 0 && size_t(p.top_k) < kept.size()) kept.resize(size_t(p.top_k));
  std::vector<double> weight(static_cast<size_t>(vocab), 0.0);
  double total = 0;
  for (int32_t id : kept)
    total += weight[size_t(id)] = std::exp(double(row[size_t(id)] - max_logit) * inv_t);
  if (p.top_p < 1) {
    double mass = 0;
    size_t keep = 0;
    while (keep < kept.size() && mass < p.top_p * total) mass += weight[size_t(kept[keep++])];
    for (size_t i = keep; i < kept.size(); ++i) weight[size_t(kept[i])] = 0;
    total = mass;
  }
  for (double& w : weight) w /= total;
  return weight;
}

double total_variation_of_draws(const std::vector<float>& row, const SamplingParams& params,
                                int draws) {
  const int vocab = int(row.size());
  std::vector<float> logits;
  std::vector<RowSpec> specs;
  for (int d = 0; d < draws; ++d) {
    logits.insert(logits.end(), row.begin(), row.end());
    specs.push_back({params, {}, -1});
    specs.back().params.seed = uint64_t(d) * 7919 + 17;
  }
  std::vector<double> expected = cpu_distribution(row, params);
  GpuResult gpu = run_on_gpu(logits, vocab, specs, true);
  std::vector<double> frequency(static_cast<size_t>(vocab), 0.0);
  for (int32_t id : gpu.ids) {
    EXPECT_TRUE(id >= 0 && id < vocab && expected[size_t(id)] > 0) << "drew id " << id;
    if (id >= 0 && id < vocab) frequency[size_t(id)] += 1.0 / draws;
  }
  double distance = 0;
  for (int i = 0; i < vocab; ++i)
    distance += 0.5 * std::fabs(frequency[size_t(i)] - expected[size_t(i)]);
  return distance;
}

TEST(CudaSamplingExtras, MinPDrawsOnlyTheCpuCandidatesWithTheirProbabilities) {
  std::vector<float> row = normal_logits(1, 1000, 1.5f, 3);
  SamplingParams params;
  params.temperature = 0.7f;
  params.min_p = 0.1f;
  std::vector<double> expected = cpu_distribution(row, params);
  const auto candidates =
      std::count_if(expected.begin(), expected.end(), [](double p) { return p > 0; });
  ASSERT_GT(candidates, 5);
  ASSERT_LT(candidates, 200) << "min-p must cut, or this tests nothing";
  double distance = total_variation_of_draws(row, params, 16384);
  std::printf("min-p 0.1 at temperature 0.7 over 1000 ids (%ld kept): total variation %.4f\n",
              long(candidates), distance);
  EXPECT_LT(distance, 0.04);

  params.top_k = 8;  // with min-p, the stricter of the two cuts
  params.top_p = 0.8f;
  distance = total_variation_of_draws(row, params, 16384);
  std::printf("min-p 0.1 + top-k 8 + top-p 0.8: total variation %.4f\n", distance);
  EXPECT_LT(distance, 0.04);
}

TEST(CudaSamplingExtras, LogprobsEqualTheCpuWithinFloatNoise) {
  const int vocab = 151936;
  const int asked[] = {-1, 0, 1, 2, 5, kMaxTopLogprobs, 3};
  const int rows = int(std::size(asked));
  std::vector<float> logits = normal_logits(rows, vocab, 3, 4);
  std::vector<RowSpec> specs = adjusted_rows(logits, rows, vocab, 5);
  for (int r = 0; r < rows; ++r) {
    specs[size_t(r)].params.logprobs = asked[r];
    specs[size_t(r)].params.temperature = r % 2 ? 0.8f : 0;  // drawn or greedy: raw logprobs
    specs[size_t(r)].params.seed = uint64_t(r);
  }
  GpuResult gpu = run_on_gpu(logits, vocab, specs, true);
  ASSERT_EQ(gpu.logprobs.size(), size_t(rows) * kLogprobsStride);
  for (int r = 0; r < rows; ++r) {
    const TokenLogprob* got = gpu.logprobs.data() + size_t(r) * kLogprobsStride;
    if (asked[r] < 0) {
      for (int j = 0; j < kLogprobsStride; ++j) EXPECT_EQ(got[j].id, -1) << "row " << r;
      continue;
    }
    std::vector<TokenLogprob> cpu(kLogprobsStride);
    token_logprobs(row_of(logits, vocab, r), gpu.ids[size_t(r)], asked[r], cpu);
    for (int j = 0; j <= asked[r]; ++j) {
      EXPECT_EQ(got[j].id, cpu[size_t(j)].id) << "row " << r << " entry " << j;
      EXPECT_NEAR(got[j].logprob, cpu[size_t(j)].logprob, 2e-4) << "row " << r << " entry " << j;
    }
    for (int j = asked[r] + 1; j < kLogprobsStride; ++j) EXPECT_EQ(got[j].id, -1);
  }
}

}  // namespace
}  // namespace gpufrac::engine
