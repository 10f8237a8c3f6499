// The CPU runner against an independent float64 forward pass, and the paged-cache properties
// the scheduler relies on: incremental decode == recompute, chunked prefill == one shot, a batch
// == each sequence alone, determinism, pipelined steps (placeholders for the previous step's
// samples) == steps fed the real ids, and bad batches rejected.
//
// Relative error of a logits row = max_i |cpu_i - ref_i| / max_i |ref_i| (over the whole vocab).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <stdexcept>
#include <utility>

#include "common/error.h"
#include "cpu_reference_model.h"
#include "engine/cpu/cpu_runner.h"
#include "engine/model/presets.h"

namespace gpufrac::engine {
namespace {

using test_util::max_relative_error;
using test_util::ReferenceModel;

const ModelWeights& tiny_weights() {
  static const ModelWeights weights = generate_random_weights(*find_preset("tiny"), 7, 2);
  return weights;
}

// Runs a ModelRunner over paged sequences: blocks are handed out in a scrambled order so that
// block tables are neither contiguous nor increasing.
class PagedHarness {
 public:
  explicit PagedHarness(const ModelWeights& weights, int threads = 2, int block_size = 4,
                        int num_blocks = 128)
      : runner_(make_cpu_runner(weights, threads)), block_size_(block_size) {
    runner_->allocate_kv_cache(num_blocks, block_size);
    for (int i = 0; i < num_blocks; ++i) free_blocks_.push_back((i * 37 + 11) % num_blocks);
  }

  ModelRunner& runner() { return *runner_; }

  struct Feed {
    Feed(int sequence, std::vector<int32_t> tokens, bool sample = true, SamplingParams sampling = {})
        : sequence(sequence), tokens(std::move(tokens)), sample(sample), sampling(sampling) {}
    int sequence;
    std::vector<int32_t> tokens;
    bool sample;
    SamplingParams sampling;
  };

  // One forward over all feeds; returns the logits of each sampling feed (in order) and fills
  // `next_tokens` when given.
  std::vector<std::vector<float>> step(const std::vector<Feed>& feeds,
                                       std::vector<int32_t>* next_tokens = nullptr) {
    StepBatch batch;
    batch.return_logits = true;
    for (const Feed& feed : feeds) {
      Sequence& seq = sequences_[feed.sequence];
      int64_t end = seq.length + int64_t(feed.tokens.size());
      while (int64_t(seq.blocks.size()) * block_size_ < end) {
        seq.blocks.push_back(free_blocks_.front());
        free_blocks_.erase(free_blocks_.begin());
      }
      SequenceWork work;
      work.tokens = feed.tokens;
      work.start_position = seq.length;
      work.block_table = seq.blocks;
      work.sample = feed.sample;
      work.sampling = feed.sampling;
      batch.sequences.push_back(work);
    }
    StepResult result;
    runner_->forward(batch, result);
    for (const Feed& feed : feeds) sequences_[feed.sequence].length += int32_t(feed.tokens.size());
    if (next_tokens) *next_tokens = result.next_tokens;
    int64_t vocab = runner_->config().vocab_size;
    std::vector<std::vector<float>> rows;
    for (size_t i = 0; i < result.next_tokens.size(); ++i) {
      rows.emplace_back(result.logits.begin() + int64_t(i) * vocab,
                        result.logits.begin() + int64_t(i + 1) * vocab);
    }
    return rows;
  }

  std::vector<float> prefill(int sequence, const std::vector<int32_t>& tokens) {
    return step({{sequence, tokens}})[0];
  }

 private:
  struct Sequence {
    int32_t length = 0;
    std::vector<int32_t> blocks;
  };
  std::unique_ptr<ModelRunner> runner_;
  int block_size_;
  std::vector<int32_t> free_blocks_;
  std::map<int, Sequence> sequences_;
};

std::vector<int32_t> random_tokens(int count, int vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
  std::vector<int32_t> tokens;
  for (int i = 0; i < count; ++i) tokens.push_back(pick(gen));
  return tokens;
}

std::vector<int32_t> slice(const std::vector<int32_t>& v, size_t begin, size_t end) {
  return {v.begin() + int64_t(begin), v.begin() + int64_t(end)};
}

void expect_same_logits(const std::vector<float>& a, const std::vector<float>& b,
                        const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  std::vector<double> reference(b.begin(), b.end());
  EXPECT_LT(max_relative_error(a, reference), 1e-6) << what;
}

// Prefills `prompt` then feeds `decoded` one token at a time; checks every step's logits against
// the float64 reference. Returns the worst relative error.
double check_against_reference(const ModelWeights& weights, const std::vector<int32_t>& prompt,
                               const std::vector<int32_t>& decoded) {
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), decoded.begin(), decoded.end());
  std::vector<int> at;
  for (size_t i = prompt.size() - 1; i < all.size(); ++i) at.push_back(int(i));
  std::vector<std::vector<double>> expected = ReferenceModel(weights).logits(all, at);

  PagedHarness harness(weights);
  std::vector<std::vector<float>> actual = {harness.prefill(0, prompt)};
  for (int32_t token : decoded) actual.push_back(harness.step({{0, {token}}})[0]);
  double worst = 0;
  for (size_t i = 0; i < at.size(); ++i) {
    double error = max_relative_error(actual[i], expected[i]);
    EXPECT_LT(error, 1e-4) << "logits after token " << at[i];
    worst = std::max(worst, error);
  }
  return worst;
}

TEST(CpuRunner, TinyMatchesFloat64Reference) {
  const ModelWeights& w = tiny_weights();
  std::vector<int32_t> prompt = random_tokens(13, w.config.vocab_size, 1);
  prompt[3] = 151645;  // <|im_end|>: the top of the vocabulary
  double worst = check_against_reference(w, prompt, {17, 151643, 100000, 5});
  RecordProperty("max_relative_error", std::to_string(worst));
  std::printf("tiny: max relative error vs float64 reference %.3g\n", worst);
}

TEST(CpuRunner, LogitsAreNotDegenerate) {
  // Guards the reference comparison: the logits must vary, or matching them proves little.
  PagedHarness harness(tiny_weights());
  std::vector<float> logits = harness.prefill(0, {1, 2, 3, 4, 5});
  auto [lo, hi] = std::minmax_element(logits.begin(), logits.end());
  EXPECT_GT(*hi - *lo, 0.5f);
  std::vector<float> other = harness.step({{0, {6}}})[0];
  EXPECT_NE(logits, other);
}

TEST(CpuRunner, Qwen2WithBiasesMatchesReference) {
  ModelConfig c;
  c.name = "qwen2-test";
  c.family = ModelFamily::kQwen2;
  c.num_layers = 2;
  c.hidden_size = 64;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.intermediate_size = 96;
  c.vocab_size = 1000;
  c.max_position_embeddings = 512;
  c.rope_theta = 10000;
  c.qkv_bias = true;
  c.tie_word_embeddings = false;
  ModelWeights w = generate_random_weights(c, 3, 2);
  check_against_reference(w, random_tokens(9, c.vocab_size, 2), {4, 999, 0});
}

TEST(CpuRunner, LlamaWithRopeScalingMatchesReference) {
  ModelConfig c;
  c.name = "llama-test";
  c.family = ModelFamily::kLlama;
  c.num_layers = 2;
  c.hidden_size = 96;  // q width 4 x 16 = 64 < hidden
  c.num_heads = 4;
  c.num_kv_heads = 1;
  c.head_dim = 16;
  c.intermediate_size = 128;
  c.vocab_size = 777;
  c.max_position_embeddings = 512;
  c.rope_theta = 500000;
  c.rms_norm_eps = 1e-5;
  c.rope_scaling = {8, 1, 4, 16};  // wavelengths 4..16 blended, longer ones slowed 8x
  ModelWeights w = generate_random_weights(c, 4, 2);
  check_against_reference(w, random_tokens(21, c.vocab_size, 3), {5, 6});
}

TEST(CpuRunner, IncrementalDecodeEqualsRecompute) {
  const ModelWeights& w = tiny_weights();
  std::vector<int32_t> tokens = random_tokens(20, w.config.vocab_size, 4);
  PagedHarness incremental(w);
  std::vector<std::vector<float>> steps = {incremental.prefill(0, slice(tokens, 0, 6))};
  for (size_t i = 6; i < tokens.size(); ++i) steps.push_back(incremental.step({{0, {tokens[i]}}})[0]);
  for (size_t length : {6u, 7u, 12u, 16u, 17u, 20u}) {  // block size 4: edges and middles
    PagedHarness fresh(w);
    expect_same_logits(steps[length - 6], fresh.prefill(0, slice(tokens, 0, length)),
                       "length " + std::to_string(length));
  }
}

TEST(CpuRunner, ChunkedPrefillEqualsOneShot) {
  const ModelWeights& w = tiny_weights();
  std::vector<int32_t> tokens = random_tokens(23, w.config.vocab_size, 5);
  PagedHarness one_shot(w), chunked(w);
  std::vector<float> expected = one_shot.prefill(0, tokens);
  size_t at = 0;
  for (size_t chunk : {5u, 1u, 7u}) {
    chunked.step({{0, slice(tokens, at, at + chunk), /*sample=*/false}});
    at += chunk;
  }
  expect_same_logits(chunked.prefill(0, slice(tokens, at, tokens.size())), expected, "chunked");
  // The caches agree too: the next decode step gives the same logits.
  expect_same_logits(chunked.step({{0, {42}}})[0], one_shot.step({{0, {42}}})[0], "after");
}

TEST(CpuRunner, BatchEqualsEachSequenceAlone) {
  const ModelWeights& w = tiny_weights();
  std::vector<int32_t> a = random_tokens(9, w.config.vocab_size, 6);
  std::vector<int32_t> b = random_tokens(6, w.config.vocab_size, 7);
  std::vector<int32_t> c = random_tokens(11, w.config.vocab_size, 8);

  // Alone: a prefills 9; b prefills 5 then decodes 1; c prefills 4, then 7 more.
  PagedHarness alone(w);
  std::vector<float> a_alone = alone.prefill(0, a);
  alone.prefill(1, slice(b, 0, 5));
  std::vector<float> b_alone = alone.step({{1, {b[5]}}})[0];
  alone.prefill(2, slice(c, 0, 4));
  std::vector<float> c_alone = alone.prefill(2, slice(c, 4, 11));

  // Together: the second step mixes a's prefill, b's decode and c's middle chunk.
  PagedHarness together(w);
  together.step({{1, slice(b, 0, 5), false}, {2, slice(c, 0, 4), false}});
  std::vector<std::vector<float>> rows =
      together.step({{0, a}, {1, {b[5]}}, {2, slice(c, 4, 11)}});
  ASSERT_EQ(rows.size(), 3u);
  expect_same_logits(rows[0], a_alone, "a");
  expect_same_logits(rows[1], b_alone, "b");
  expect_same_logits(rows[2], c_alone, "c");
}

TEST(CpuRunner, OnlySampledSequencesGetTokensAndLogits) {
  PagedHarness harness(tiny_weights());
  std::vector<int32_t> next;
  std::vector<std::vector<float>> rows =
      harness.step({{0, {1, 2, 3}, false}, {1, {4, 5}, true}, {2, {6}, false}}, &next);
  EXPECT_EQ(rows.size(), 1u);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0], std::max_element(rows[0].begin(), rows[0].end()) - rows[0].begin());
  StepResult result{{7}, {1.0f}, {TokenLogprob{}}};  // stale contents from an earlier step
  harness.runner().forward(StepBatch{}, result);
  EXPECT_TRUE(result.next_tokens.empty() && result.logits.empty() && result.logprobs.empty());
}

TEST(CpuRunner, GreedyGenerationIsDeterministic) {
  auto generate = [] {
    PagedHarness harness(tiny_weights());
    std::vector<int32_t> next;
    harness.step({{0, {100, 200, 300}}}, &next);
    std::vector<int32_t> out = next;
    for (int i = 0; i < 10; ++i) {
      harness.step({{0, {next[0]}}}, &next);
      out.push_back(next[0]);
    }
    return out;
  };
  std::vector<int32_t> first = generate();
  EXPECT_EQ(first, generate());
  for (int32_t token : first) {
    EXPECT_GE(token, 0);
    EXPECT_LT(token, 151936);
  }
}

TEST(CpuRunner, ThreadCountDoesNotChangeLogits) {
  std::vector<int32_t> tokens = random_tokens(10, 151936, 9);
  PagedHarness one(tiny_weights(), 1), three(tiny_weights(), 3);
  EXPECT_EQ(one.prefill(0, tokens), three.prefill(0, tokens));
}

TEST(CpuRunner, SeededSamplingDoesNotDependOnTheBatch) {
  SamplingParams sampling;
  sampling.temperature = 1.5f;
  sampling.top_k = 50;
  sampling.seed = 1234;
  std::vector<int32_t> alone_tokens, batch_tokens;
  PagedHarness alone(tiny_weights()), batched(tiny_weights());
  alone.step({{0, {10, 11, 12}, true, sampling}}, &alone_tokens);
  batched.step({{5, {7, 8}, true, sampling}, {0, {10, 11, 12}, true, sampling}}, &batch_tokens);
  ASSERT_EQ(batch_tokens.size(), 2u);
  EXPECT_EQ(alone_tokens[0], batch_tokens[1]);
}

TEST(CpuRunner, RejectsBadBatchesWithoutCrashing) {
  PagedHarness harness(tiny_weights());
  EXPECT_THROW(harness.step({{0, {151936}}}), RuntimeFailure);
  EXPECT_THROW(harness.step({{0, {-1}}}), RuntimeFailure);
  EXPECT_THROW(harness.step({{0, {}}}), RuntimeFailure);

  std::vector<int32_t> tokens = {1, 2, 3, 4, 5};
  std::vector<int32_t> short_table = {0};  // 4 positions for 5 tokens
  std::vector<int32_t> bad_block = {0, 128};
  for (const std::vector<int32_t>* table : {&short_table, &bad_block}) {
    StepBatch batch;
    batch.sequences.push_back({tokens, 0, *table, true, {}});
    StepResult result;
    EXPECT_THROW(harness.runner().forward(batch, result), RuntimeFailure);
  }
  // Still usable afterwards.
  EXPECT_EQ(harness.prefill(0, tokens).size(), 151936u);

  std::unique_ptr<ModelRunner> unallocated = make_cpu_runner(tiny_weights(), 1);
  StepBatch batch;
  batch.sequences.push_back({tokens, 0, bad_block, true, {}});
  StepResult result;
  EXPECT_THROW(unallocated->forward(batch, result), RuntimeFailure);
}

TEST(CpuRunner, PipelinedStepTakesPlaceholdersFromThePreviousStep) {
  // The decode step is submitted before the prefill is collected and feeds both of its samples
  // as placeholders, in swapped order; a runner fed the real ids step by step must agree exactly.
  std::vector<int32_t> a = random_tokens(5, 151936, 21), b = random_tokens(3, 151936, 22);
  std::vector<int32_t> table_a = {0, 1}, table_b = {2};
  std::unique_ptr<ModelRunner> pipelined = make_cpu_runner(tiny_weights(), 2);
  std::unique_ptr<ModelRunner> stepwise = make_cpu_runner(tiny_weights(), 2);
  pipelined->allocate_kv_cache(8, 4);
  stepwise->allocate_kv_cache(8, 4);
  StepBatch prefill;
  prefill.return_logits = true;
  prefill.sequences.push_back({a, 0, table_a, true, {}});
  prefill.sequences.push_back({b, 0, table_b, true, {}});
  const std::vector<int32_t> placeholder = {-1};  // never read: the runner takes the sample
  StepBatch decode;
  decode.return_logits = true;
  decode.sequences.push_back({placeholder, 3, table_b, true, {}, 1});
  decode.sequences.push_back({placeholder, 5, table_a, true, {}, 0});
  pipelined->submit(prefill);
  pipelined->submit(decode);
  EXPECT_THROW(pipelined->submit(decode), std::logic_error);  // two are outstanding
  StepResult first, second;
  pipelined->collect(first);
  pipelined->collect(second);
  EXPECT_THROW(pipelined->collect(second), std::logic_error);

  StepResult expected_first, expected_second;
  stepwise->forward(prefill, expected_first);
  ASSERT_EQ(expected_first.next_tokens.size(), 2u);
  std::vector<int32_t> next_a = {expected_first.next_tokens[0]};
  std::vector<int32_t> next_b = {expected_first.next_tokens[1]};
  StepBatch real;
  real.return_logits = true;
  real.sequences.push_back({next_b, 3, table_b, true, {}});
  real.sequences.push_back({next_a, 5, table_a, true, {}});
  stepwise->forward(real, expected_second);
  EXPECT_EQ(first.next_tokens, expected_first.next_tokens);
  EXPECT_EQ(first.logits, expected_first.logits);
  EXPECT_EQ(second.next_tokens, expected_second.next_tokens);
  EXPECT_EQ(second.logits, expected_second.logits);

  decode.sequences[0].previous_sample_row = 2;  // the previous step sampled two rows
  EXPECT_THROW(pipelined->forward(decode, second), RuntimeFailure);
}

TEST(CpuRunner, ReportsKvBlockBytesAndMemory) {
  std::unique_ptr<ModelRunner> runner = make_cpu_runner(tiny_weights(), 1);
  // 2 layers x (K and V) x 16 tokens x 2 kv heads x 32 x fp32.
  EXPECT_EQ(runner->kv_block_bytes(16), 2u * 2 * 16 * 64 * 4);
  EXPECT_GT(runner->available_memory_bytes(), 0u);
  EXPECT_NE(runner->device_name().find("cpu"), std::string::npos);
  EXPECT_EQ(runner->config().name, "tiny");
}

}  // namespace
}  // namespace gpufrac::engine
