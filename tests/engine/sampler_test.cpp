// The CPU sampler: greedy, temperature, top-k / top-p / min-p support, seeded determinism,
// suppression, logit_bias and penalties (with a resolved placeholder), and logprobs.
#include "engine/model/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

namespace gpufrac::engine {
namespace {

// Draw counts per token over seeds 0..draws-1 (generated fixed at 0).
std::map<int32_t, int> histogram(const std::vector<float>& logits, SamplingParams params,
                                 int draws) {
  std::map<int32_t, int> counts;
  for (int seed = 0; seed < draws; ++seed) {
    params.seed = uint64_t(seed);
    ++counts[sample_token(logits, params)];
  }
  return counts;
}

std::set<int32_t> support(const std::map<int32_t, int>& counts) {
  std::set<int32_t> ids;
  for (const auto& [id, count] : counts) ids.insert(id);
  return ids;
}

TEST(Sampler, GreedyTakesTheArgmaxAndTheLowestIdOnTies) {
  SamplingParams greedy;
  EXPECT_EQ(sample_token(std::vector<float>{0.1f, 3.0f, -2.0f, 1.0f}, greedy), 1);
  EXPECT_EQ(sample_token(std::vector<float>{2.0f, 5.0f, 5.0f}, greedy), 1);
  greedy.top_k = 1;  // ignored without temperature, and harmless
  greedy.seed = 99;
  EXPECT_EQ(sample_token(std::vector<float>{0.1f, 3.0f, -2.0f, 1.0f}, greedy), 1);
}

TEST(Sampler, SuppressedIdsAreNeverDrawn) {
  std::vector<float> logits = {0.0f, 10.0f, 9.5f, 0.0f, 9.0f};
  std::vector<int32_t> suppressed = {1, 4};
  SamplingParams params;
  params.suppressed_ids = suppressed;
  EXPECT_EQ(sample_token(logits, params), 2);
  params.temperature = 5.0f;  // nearly flat: every allowed id shows up
  std::map<int32_t, int> counts = histogram(logits, params, 3000);
  EXPECT_EQ(support(counts), (std::set<int32_t>{0, 2, 3}));
  params.top_k = 2;
  EXPECT_EQ(support(histogram(logits, params, 1000)), (std::set<int32_t>{0, 2}));
}

TEST(Sampler, NonFiniteLogitsAreNeverDrawnAndAllExcludedGivesMinusOne) {
  std::vector<float> logits = {NAN, 1.0f, -INFINITY, INFINITY};
  SamplingParams params;
  EXPECT_EQ(sample_token(logits, params), 1);
  params.temperature = 1;
  EXPECT_EQ(support(histogram(logits, params, 200)), (std::set<int32_t>{1}));
  std::vector<int32_t> all = {1};
  params.suppressed_ids = all;
  EXPECT_EQ(sample_token(logits, params), -1);
}

TEST(Sampler, TemperatureFollowsTheSoftmax) {
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  SamplingParams params;
  params.temperature = 1;
  const int draws = 20000;
  std::map<int32_t, int> counts = histogram(logits, params, draws);
  EXPECT_NEAR(counts[0] / double(draws), 0.5, 0.02);
  EXPECT_NEAR(counts[1] / double(draws), 0.3, 0.02);
  EXPECT_NEAR(counts[2] / double(draws), 0.2, 0.02);
  // Temperature 0.5 squares the odds: 25 : 9 : 4.
  params.temperature = 0.5f;
  counts = histogram(logits, params, draws);
  EXPECT_NEAR(counts[0] / double(draws), 25.0 / 38, 0.02);
  EXPECT_NEAR(counts[2] / double(draws), 4.0 / 38, 0.02);
}

TEST(Sampler, TopKRestrictsTheSupport) {
  std::vector<float> logits = {1.0f, 4.0f, 2.0f, 3.9f, 3.8f, 0.0f};
  SamplingParams params;
  params.temperature = 10;  // flat, so every kept id is drawn
  params.top_k = 3;
  EXPECT_EQ(support(histogram(logits, params, 2000)), (std::set<int32_t>{1, 3, 4}));
  params.top_k = 1;
  EXPECT_EQ(support(histogram(logits, params, 100)), (std::set<int32_t>{1}));
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  // Probabilities 0.5, 0.25, 0.15, 0.1 at ids 3, 0, 2, 1.
  std::vector<float> logits = {std::log(0.25f), std::log(0.1f), std::log(0.15f), std::log(0.5f)};
  SamplingParams params;
  params.temperature = 1;
  params.top_p = 0.7f;  // 0.5 < 0.7 <= 0.75
  std::map<int32_t, int> counts = histogram(logits, params, 6000);
  EXPECT_EQ(support(counts), (std::set<int32_t>{0, 3}));
  EXPECT_NEAR(counts[3] / 6000.0, 2.0 / 3, 0.03);  // renormalised 0.5 / 0.75
  params.top_p = 0.85f;
  EXPECT_EQ(support(histogram(logits, params, 3000)), (std::set<int32_t>{0, 2, 3}));
  params.top_p = 0.3f;
  EXPECT_EQ(support(histogram(logits, params, 500)), (std::set<int32_t>{3}));
  // top-k first, then top-p on what is left: k = 2 leaves 0.5 / 0.25, p = 0.6 keeps only id 3.
  params.top_k = 2;
  params.top_p = 0.6f;
  EXPECT_EQ(support(histogram(logits, params, 500)), (std::set<int32_t>{3}));
}

TEST(Sampler, TopPOverAFullVocabularyMatchesABruteForceCut) {
  const int vocab = 151936;
  std::vector<float> logits(vocab);
  for (int i = 0; i < vocab; ++i) logits[i] = float((i * 7919) % 1000) / 100.0f;  // 0 .. 9.99
  SamplingParams params;
  params.temperature = 0.7f;
  params.top_p = 0.9f;
  // Brute force: sort everything, accumulate until 0.9.
  std::vector<std::pair<float, int32_t>> order;
  double total = 0;
  for (int i = 0; i < vocab; ++i) total += std::exp((logits[i] - 9.99) / 0.7);
  for (int i = 0; i < vocab; ++i) order.push_back({-logits[i], i});
  std::sort(order.begin(), order.end());
  std::set<int32_t> allowed;
  double mass = 0;
  for (const auto& [negative, id] : order) {
    allowed.insert(id);
    mass += std::exp((-negative - 9.99) / 0.7) / total;
    if (mass >= 0.9) break;
  }
  ASSERT_GT(allowed.size(), 256u);  // beyond the sampler's first window
  for (int seed = 0; seed < 50; ++seed) {
    params.seed = uint64_t(seed);
    EXPECT_TRUE(allowed.count(sample_token(logits, params))) << seed;
  }
}

TEST(Sampler, DrawIsAPureFunctionOfSeedAndStep) {
  std::vector<float> logits(1000);
  for (int i = 0; i < 1000; ++i) logits[i] = float(i % 17) * 0.1f;
  SamplingParams params;
  params.temperature = 1;
  params.seed = 42;
  std::vector<int32_t> first, again, other_seed;
  for (int64_t step = 0; step < 50; ++step) {
    params.generated = step;
    first.push_back(sample_token(logits, params));
  }
  for (int64_t step = 0; step < 50; ++step) {
    params.generated = step;
    again.push_back(sample_token(logits, params));
  }
  params.seed = 43;
  for (int64_t step = 0; step < 50; ++step) {
    params.generated = step;
    other_seed.push_back(sample_token(logits, params));
  }
  EXPECT_EQ(first, again);
  EXPECT_NE(first, other_seed);
  EXPECT_GT(std::set<int32_t>(first.begin(), first.end()).size(), 20u);  // steps differ
}

TEST(Sampler, AdjustLogitFollowsVllmFormulas) {
  Penalties repetition{0, 0, 2};
  EXPECT_FLOAT_EQ(adjust_logit(3, 0, 0, true, repetition), 1.5f);     // positive: divided
  EXPECT_FLOAT_EQ(adjust_logit(-1, 0, 0, true, repetition), -2.0f);   // negative: multiplied
  EXPECT_FLOAT_EQ(adjust_logit(-1, 0, 1, false, repetition), -2.0f);  // generated counts as seen
  EXPECT_FLOAT_EQ(adjust_logit(3, 0, 0, false, repetition), 3.0f);    // neither: untouched
  EXPECT_FLOAT_EQ(adjust_logit(1, 4, 0, true, repetition), 2.5f);     // bias first: (1 + 4) / 2
  Penalties counted{0.25f, 0.5f, 1};
  EXPECT_FLOAT_EQ(adjust_logit(1, 0.5f, 2, false, counted), 1.5f - 1.0f - 0.25f);
  EXPECT_FLOAT_EQ(adjust_logit(1, 0, 0, true, counted), 1.0f);  // never generated: no penalty
  for (float x : {-3.5f, 0.0f, 0.7f, 12.0f}) {
    EXPECT_EQ(adjust_logit(x, 0, 7, true, Penalties{}), x) << "neutral values change nothing";
  }
  EXPECT_FALSE(Penalties{}.active());
  EXPECT_TRUE((Penalties{0, 0, 1.1f}.active()));
}

TEST(Sampler, LogitBiasAndPenaltiesChangeTheGreedyPick) {
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f};
  SamplingParams params;
  EXPECT_EQ(sample_token(logits, params), 3);
  std::vector<LogitAdjustment> bias = {{1, 10.0f, 0, false}};
  params.adjustments = bias;
  EXPECT_EQ(sample_token(logits, params), 1);
  std::vector<LogitAdjustment> seen = {{3, 0, 0, true}};  // 3 / 2 = 1.5 < 2
  params.adjustments = seen;
  params.penalties.repetition = 2;
  EXPECT_EQ(sample_token(logits, params), 0);
  std::vector<LogitAdjustment> repeated = {{3, 0, 2, false}};  // 3 - 2 x 0.6 = 1.8 < 2
  params.adjustments = repeated;
  params.penalties = {0, 0.6f, 1};
  EXPECT_EQ(sample_token(logits, params), 0);
  params.penalties = {0, 0.4f, 1};  // 3 - 0.8 = 2.2 > 2
  EXPECT_EQ(sample_token(logits, params), 3);
  // A -100 bias keeps an id out of temperature draws as well.
  std::vector<LogitAdjustment> banned = {{3, -100.0f, 0, false}};
  params.adjustments = banned;
  params.penalties = {};
  params.temperature = 1;
  EXPECT_EQ(support(histogram(logits, params, 2000)).count(3), 0u);
  EXPECT_EQ(logits[3], 3.0f) << "the caller's logits are not modified";
}

TEST(Sampler, AResolvedPlaceholderCountsAsOneMoreGeneratedToken) {
  std::vector<float> logits = {1.0f, 1.5f};
  SamplingParams params;
  params.penalties.frequency = 0.3f;
  std::vector<LogitAdjustment> once = {{1, 0, 1, false}};
  params.adjustments = once;
  EXPECT_EQ(sample_token(logits, params), 1);  // 1.5 - 0.3 = 1.2
  params.resolved_placeholder = 1;
  EXPECT_EQ(sample_token(logits, params), 0);  // counted twice: 1.5 - 0.6 = 0.9
  params.adjustments = {};
  params.penalties = {0.6f, 0, 1};
  EXPECT_EQ(sample_token(logits, params), 0);  // not listed: a first occurrence, 1.5 - 0.6
  params.penalties = {};
  EXPECT_EQ(sample_token(logits, params), 1);  // without a penalty the placeholder changes nothing
}

TEST(Sampler, MinPKeepsIdsWithinAFactorOfTheMostLikely) {
  // Probabilities 0.5, 0.3, 0.15, 0.05.
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams params;
  params.temperature = 1;
  params.min_p = 0.25f;  // keeps p >= 0.125
  EXPECT_EQ(support(histogram(logits, params, 4000)), (std::set<int32_t>{0, 1, 2}));
  params.min_p = 0.7f;  // keeps p >= 0.35
  EXPECT_EQ(support(histogram(logits, params, 500)), (std::set<int32_t>{0}));
  // At temperature 2 the ratios to the top are sqrt: 0.77, 0.55, 0.32.
  params.temperature = 2;
  params.min_p = 0.5f;
  EXPECT_EQ(support(histogram(logits, params, 4000)), (std::set<int32_t>{0, 1, 2}));
  // min-p first, then top-k on what is left.
  params.temperature = 1;
  params.min_p = 0.25f;
  params.top_k = 2;
  EXPECT_EQ(support(histogram(logits, params, 2000)), (std::set<int32_t>{0, 1}));
  // Renormalised over the kept ids: 0.5 / 0.95 for id 0 when min-p keeps 0, 1, 2.
  params.top_k = 0;
  std::map<int32_t, int> counts = histogram(logits, params, 20000);
  EXPECT_NEAR(counts[0] / 20000.0, 0.5 / 0.95, 0.02);
}

TEST(Sampler, TokenLogprobsAreTheLogSoftmaxOfTheRawLogits) {
  std::vector<float> logits = {1.0f, 3.0f, NAN, 3.0f, -2.0f, -INFINITY};
  double total = 0;
  for (float x : {1.0f, 3.0f, 3.0f, -2.0f}) total += std::exp(double(x));
  std::vector<TokenLogprob> out(kLogprobsStride);
  token_logprobs(logits, 4, 3, out);
  EXPECT_EQ(out[0].id, 4);
  EXPECT_NEAR(out[0].logprob, -2.0 - std::log(total), 1e-6);
  EXPECT_EQ(out[1].id, 1);  // a tie: the lower id first
  EXPECT_EQ(out[2].id, 3);
  EXPECT_EQ(out[3].id, 0);
  EXPECT_NEAR(out[1].logprob, 3.0 - std::log(total), 1e-6);
  EXPECT_NEAR(out[3].logprob, 1.0 - std::log(total), 1e-6);
  // More asked for than there are finite ids: the rest stay empty; NaN and -inf are never top.
  token_logprobs(logits, 2, 6, out);
  EXPECT_EQ(out[0].logprob, -INFINITY);  // the sampled id's logit is not finite
  EXPECT_EQ(out[4].id, 4);
  EXPECT_EQ(out[5].id, -1);
  EXPECT_EQ(out[6].id, -1);
  token_logprobs(logits, 99, 0, out);
  EXPECT_EQ(out[0].logprob, -INFINITY);
}

TEST(Sampler, UniformIsInTheOpenUnitInterval) {
  for (uint64_t seed = 0; seed < 1000; ++seed) {
    double u = sampling_uniform(seed, int64_t(seed * 3));
    EXPECT_GT(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
  EXPECT_EQ(sampling_uniform(5, 6), sampling_uniform(5, 6));
  EXPECT_NE(sampling_uniform(5, 6), sampling_uniform(6, 5));
}

}  // namespace
}  // namespace gpufrac::engine
