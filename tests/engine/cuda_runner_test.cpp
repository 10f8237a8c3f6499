// GPU tests (label gpu) of the CUDA runner against the CPU runner, the fp32 oracle, on the `tiny`
// preset with identical weights (the host-generated preset, uploaded).
//
// Bound on |cuda - cpu| for a row of logits: kRelativeBound x the rms of the CPU row. Why 0.1:
// the CUDA runner rounds about 7 activations per layer to bf16 (normed input, q, k, v, attention
// output, normed post-attention input, SiLU*up) plus the final hidden state; each rounding has
// unit roundoff u = 2^-8 and an rms relative error of u/sqrt(3) = 0.23%. Independent errors add
// in quadrature: sqrt(7 * 2 + 1) * 0.23% = 0.9% of the final hidden state for tiny's 2 layers,
// so about 0.9% of the logits' rms per entry and ~4.5x that (4%) at the worst of 151,936 entries.
// 0.1 leaves 2.5x slack; a real bug (wrong RoPE pairing, a missing norm, a stale KV slot) moves
// logits by O(rms).
// Top-1: the CUDA runner's greedy token must equal the CPU's, except where the CPU's own logit of
// the CUDA token is within the bound of its maximum (a near tie, counted and printed).
// Both runners are always fed the CPU's tokens (teacher forcing), so one near tie cannot cascade.
#include "engine/cuda/cuda_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>

#include "common/error.h"
#include "cuda_test_support.h"
#include "engine/cpu/cpu_runner.h"
#include "engine/cuda/cuda_runner.h"
#include "engine/logit_adjustment_table.h"
#include "engine/model/presets.h"
#include "engine/model/sampler.h"
#include "engine/runner_factory.h"

namespace gpufrac::engine {
namespace {

using testing::BlockCounter;
using testing::TestSequence;

constexpr uint64_t kSeed = 7;
constexpr int kBlockSize = 16;
constexpr int kNumBlocks = 1024;
constexpr double kRelativeBound = 0.1;

const ModelWeights& tiny_weights() {
  static const ModelWeights* weights =
      new ModelWeights(generate_random_weights(*find_preset("tiny"), kSeed, 0));
  return *weights;
}

// The runners the tests compare bit for bit: linear kernels chosen by rule, not by timing (two
// runners timing near ties could choose differently).
CudaRunnerOptions reproducible_options() {
  CudaRunnerOptions options;
  options.max_model_len = 4096;
  options.time_linear_choices = false;
  return options;
}

std::unique_ptr<CudaRunner> make_tiny_cuda(bool graphs = true) {
  CudaRunnerOptions options = reproducible_options();
  options.use_graphs = graphs;
  auto runner = std::make_unique<CudaRunner>(DeviceWeights::upload(tiny_weights()), options);
  runner->allocate_kv_cache(kNumBlocks, kBlockSize);
  return runner;
}

std::vector<int32_t> random_prompt(std::mt19937& rng, int length, int vocab) {
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  std::vector<int32_t> prompt(static_cast<size_t>(length));
  for (int32_t& t : prompt) t = id(rng);
  return prompt;
}

struct Tally {
  int rows = 0;
  int exact_top1 = 0;
  int near_ties = 0;
  double worst_relative = 0;  // max |cuda - cpu| / rms(cpu) over rows
};

class TinyCudaVsCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    cpu_ = make_cpu_runner(tiny_weights(), 0);
    cpu_->allocate_kv_cache(kNumBlocks, kBlockSize);
    cuda_ = make_tiny_cuda();
  }
  void TearDown() override {
    std::printf("tiny cuda vs cpu: %d rows, worst |diff|/rms %.4f (bound %.2f), top-1 equal %d, "
                "near ties %d\n",
                tally_.rows, tally_.worst_relative, kRelativeBound, tally_.exact_top1,
                tally_.near_ties);
  }

  TestSequence& add_sequence(int prompt_length, int max_new) {
    auto s = std::make_unique<TestSequence>();
    s->tokens = random_prompt(rng_, prompt_length, vocab());
    s->blocks = blocks_.take(prompt_length + max_new);
    sequences_.push_back(std::move(s));
    return *sequences_.back();
  }
  int vocab() const { return tiny_weights().config.vocab_size; }

  // Runs one step on both runners, compares every sampled row, appends the CPU's tokens.
  void step(std::vector<TestSequence*> active, int chunk) {
    StepBatch batch = testing::make_step(active, chunk, true);
    StepResult cpu, cuda;
    cpu_->forward(batch, cpu);
    cuda_->forward(batch, cuda);
    ASSERT_EQ(cpu.next_tokens.size(), cuda.next_tokens.size());
    ASSERT_EQ(cpu.logits.size(), cuda.logits.size());
    const size_t v = size_t(vocab());
    size_t row = 0;
    for (size_t i = 0; i < active.size(); ++i) {
      if (!batch.sequences[i].sample) continue;
      std::span<const float> cpu_row(cpu.logits.data() + row * v, v);
      std::span<const float> cuda_row(cuda.logits.data() + row * v, v);
      testing::RowComparison c = testing::compare_rows(cpu_row, cuda_row);
      double bound = kRelativeBound * c.reference_rms;
      EXPECT_LE(c.max_abs_diff, bound) << "row " << row << " at position "
                                       << active[i]->tokens.size();
      EXPECT_EQ(cuda.next_tokens[row], testing::argmax(cuda_row)) << "greedy sampler != argmax";
      EXPECT_EQ(cpu.next_tokens[row], c.reference_top1);
      ++tally_.rows;
      tally_.worst_relative = std::max(tally_.worst_relative, c.max_abs_diff / c.reference_rms);
      if (cuda.next_tokens[row] == cpu.next_tokens[row]) {
        ++tally_.exact_top1;
      } else {
        ++tally_.near_ties;
        EXPECT_LE(c.reference_margin, bound) << "top-1 differs beyond a near tie at row " << row;
      }
      ++row;
    }
    testing::complete_step(active, batch);
    row = 0;
    for (size_t i = 0; i < active.size(); ++i) {
      if (batch.sequences[i].sample) active[i]->tokens.push_back(cpu.next_tokens[row++]);
    }
  }

  std::mt19937 rng_{1234};
  BlockCounter blocks_{kBlockSize};
  std::vector<std::unique_ptr<TestSequence>> sequences_;
  std::unique_ptr<ModelRunner> cpu_;
  std::unique_ptr<CudaRunner> cuda_;
  Tally tally_;
};

TEST_F(TinyCudaVsCpu, PrefillThenDecodeInPaddedBuckets) {
  std::vector<TestSequence*> all;
  for (int length : {1, 7, 33, 100, 64}) all.push_back(&add_sequence(length, 40));
  step(all, 4096);  // every prompt in one step
  for (int i = 0; i < 20; ++i) step(all, 1);          // 5 sequences: bucket 8, 3 padding rows
  std::vector<TestSequence*> two = {all[1], all[3]};  // bucket 2
  for (int i = 0; i < 6; ++i) step(two, 1);
}

TEST_F(TinyCudaVsCpu, ChunkedPrefillMixedWithDecodes) {
  TestSequence& decoding = add_sequence(5, 40);
  step({&decoding}, 4096);
  TestSequence& long_prompt = add_sequence(90, 8);
  for (int i = 0; i < 8; ++i) step({&decoding, &long_prompt}, 17);  // chunks of 17 + one decode
}

TEST_F(TinyCudaVsCpu, LongContextDecodeSplitsAttention) {
  TestSequence& s = add_sequence(1500, 10);
  for (int i = 0; i < 3; ++i) step({&s}, 512);
  for (int i = 0; i < 8; ++i) step({&s}, 1);  // batch 1: the context is split across blocks
  EXPECT_EQ(s.computed, 1500 + 8);
}

TEST_F(TinyCudaVsCpu, ManySequencesUseLargerBuckets) {
  std::vector<TestSequence*> all;
  for (int i = 0; i < 40; ++i) all.push_back(&add_sequence(3 + i % 8, 8));
  step(all, 4096);
  for (int i = 0; i < 4; ++i) step(all, 1);  // bucket 48
}

// Three sequences of 3, 20 and 50 random tiny tokens, each with blocks for 16 tokens more.
struct ThreeSequences {
  std::vector<std::unique_ptr<TestSequence>> owned;
  std::vector<TestSequence*> all;
  ThreeSequences(std::mt19937& rng, BlockCounter& blocks) {
    for (int length : {3, 20, 50}) {
      owned.push_back(std::make_unique<TestSequence>());
      owned.back()->tokens = random_prompt(rng, length, tiny_weights().config.vocab_size);
      owned.back()->blocks = blocks.take(length + 16);
      all.push_back(owned.back().get());
    }
  }
};

// The prefill and 11 decode steps of `all` through runners `a` and `b`: every logit equal bit
// for bit, the same tokens (a's are fed back).
void expect_same_steps_bitwise(CudaRunner& a_runner, CudaRunner& b_runner,
                               std::vector<TestSequence*>& all) {
  for (int i = 0; i < 12; ++i) {
    StepBatch batch = testing::make_step(all, i == 0 ? 4096 : 1, true);
    StepResult a, b;
    a_runner.forward(batch, a);
    b_runner.forward(batch, b);
    ASSERT_EQ(a.logits.size(), b.logits.size());
    EXPECT_EQ(0, std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)))
        << "step " << i;
    EXPECT_EQ(a.next_tokens, b.next_tokens);
    testing::complete_step(all, batch);
    for (size_t s = 0; s < all.size(); ++s) all[s]->tokens.push_back(a.next_tokens[s]);
  }
}

TEST(CudaRunner, GraphReplayEqualsEagerBitwise) {
  auto with_graphs = make_tiny_cuda(true);
  auto eager = make_tiny_cuda(false);
  std::mt19937 rng(99);
  BlockCounter blocks(kBlockSize);
  ThreeSequences sequences(rng, blocks);
  expect_same_steps_bitwise(*with_graphs, *eager, sequences.all);
}

// An elastic pool (reserve_kv_cache, chunks backed on demand) computes exactly what a whole pool
// does, with sequences whose blocks straddle two chunks; backing takes device memory and
// releasing gives it back.
TEST(CudaRunner, ElasticPoolEqualsWholePoolBitwiseAndGivesMemoryBack) {
  constexpr int kPoolBlocks = 8192;  // tiny's chunk is 1024 blocks (2 MiB of one segment)
  const CudaRunnerOptions options = reproducible_options();
  CudaRunner whole(DeviceWeights::upload(tiny_weights()), options);
  whole.allocate_kv_cache(kPoolBlocks, kBlockSize);
  CudaRunner elastic(DeviceWeights::upload(tiny_weights()), options);
  elastic.reserve_kv_cache(kPoolBlocks, kBlockSize);
  const int chunk = elastic.kv_chunk_blocks();
  ASSERT_GT(chunk, 0);
  ASSERT_LE(2 * chunk, kPoolBlocks) << "the test needs at least two chunks";
  std::printf("elastic KV chunk: %d blocks of %d tokens\n", chunk, kBlockSize);

  std::mt19937 rng(5);
  BlockCounter blocks(kBlockSize);
  blocks.take((chunk - 3) * kBlockSize);  // the sequences' blocks start 3 before chunk 1
  ThreeSequences sequences(rng, blocks);
  const uint64_t free_before = device_memory_info().free_bytes;
  EXPECT_GE(elastic.back_kv_blocks(blocks.used()), blocks.used());
  const uint64_t chunk_bytes = uint64_t(chunk) * elastic.kv_block_bytes(kBlockSize);
  const uint64_t free_backed = device_memory_info().free_bytes;
  EXPECT_GE(free_before - free_backed, 2 * chunk_bytes);
  expect_same_steps_bitwise(whole, elastic, sequences.all);
  elastic.release_kv_blocks(0);
  EXPECT_GE(device_memory_info().free_bytes + chunk_bytes / 2, free_before);
  // Backed again, the pool starts from zeroed memory and computes as before.
  EXPECT_GE(elastic.back_kv_blocks(1), 1);
  elastic.release_kv_blocks(0);
}

// Runner `pipelined` submits step n+1 before collecting step n and feeds step n's samples as
// placeholders (read on the device); `stepwise` is fed the real ids one step at a time. Every
// token (and, eagerly, every logit) must be identical: decode steps in a graph bucket, a mixed
// step with a new prompt (eager) and the sample rows named in an order unlike the batch's.
TEST(CudaRunner, PipelinedPlaceholdersEqualRealTokensBitwise) {
  for (bool graphs : {true, false}) {
    // With logits, submit() waits for its step (a pageable copy): the graph run checks the truly
    // overlapped path by its tokens, the eager run every logit.
    const bool logits = !graphs;
    auto pipelined = make_tiny_cuda(graphs);
    auto stepwise = make_tiny_cuda(graphs);
    std::mt19937 rng(41);
    BlockCounter blocks(kBlockSize);
    std::vector<std::unique_ptr<TestSequence>> owned;
    auto add = [&](int length) {
      owned.push_back(std::make_unique<TestSequence>());
      owned.back()->tokens = random_prompt(rng, length, tiny_weights().config.vocab_size);
      owned.back()->blocks = blocks.take(length + 16);
      return owned.back().get();
    };
    std::vector<TestSequence*> order = {add(5), add(17), add(30)};
    const std::vector<int32_t> placeholder = {-1};
    std::vector<TestSequence*> previous_order;  // the sample rows of the step in flight
    StepResult expected, got;
    for (int step = 0; step < 8; ++step) {
      if (step == 3) order.push_back(add(20));  // a prompt joins: an eager mixed step
      if (step > 0) std::reverse(order.begin(), order.end());
      StepBatch real = testing::make_step(order, 4096, logits);
      StepBatch fed = real;
      for (size_t i = 0; i < order.size(); ++i) {
        auto row = std::find(previous_order.begin(), previous_order.end(), order[i]);
        if (row == previous_order.end()) continue;  // a new prompt: real ids
        fed.sequences[i].tokens = placeholder;
        fed.sequences[i].previous_sample_row = int32_t(row - previous_order.begin());
      }
      pipelined->submit(fed);
      if (step > 0) {
        pipelined->collect(got);
        EXPECT_EQ(got.next_tokens, expected.next_tokens) << "graphs " << graphs << " step " << step;
        EXPECT_EQ(got.logits, expected.logits) << "graphs " << graphs << " step " << step;
      }
      stepwise->forward(real, expected);
      ASSERT_EQ(expected.next_tokens.size(), order.size());
      testing::complete_step(order, real);
      for (size_t i = 0; i < order.size(); ++i) order[i]->tokens.push_back(expected.next_tokens[i]);
      previous_order = order;
    }
    pipelined->collect(got);
    EXPECT_EQ(got.next_tokens, expected.next_tokens) << "graphs " << graphs << " last step";
    EXPECT_EQ(got.logits, expected.logits) << "graphs " << graphs << " last step";
  }
}

// Sampling extras through the runner: penalties (a placeholder's token counted on the device),
// logit_bias, min-p and logprobs, beside a plain row. Runner `pipelined` feeds placeholders with
// the adjustments of the tokens known before them (as the engine does); `stepwise` feeds the real
// ids with every token counted. Tokens and logprobs must be identical. On the stepwise runner's
// raw logits (return_logits) the CPU sampler picks the same greedy ids (up to near ties) and the
// same logprobs within fp32 noise.
TEST(CudaRunner, PipelinedSamplingExtrasEqualStepwiseAndTheCpuSampler) {
  auto pipelined = make_tiny_cuda();
  auto stepwise = make_tiny_cuda();
  std::mt19937 rng(43);
  BlockCounter blocks(kBlockSize);
  const int vocab = tiny_weights().config.vocab_size;
  struct Tracked {
    std::unique_ptr<TestSequence> sequence;
    LogitAdjustmentTable table;
    std::vector<LogitAdjustment> before_newest;  // what the engine knows while one is pending
  };
  std::vector<Tracked> tracked;
  auto add = [&](SamplingParams sampling, std::vector<LogitBias> bias) {
    Tracked t;
    t.sequence = std::make_unique<TestSequence>();
    t.sequence->tokens = random_prompt(rng, 9, vocab);
    t.sequence->blocks = blocks.take(9 + 16);
    t.sequence->sampling = sampling;
    t.table = LogitAdjustmentTable(t.sequence->tokens, bias, sampling.penalties);
    tracked.push_back(std::move(t));
  };
  SamplingParams greedy_penalised;
  greedy_penalised.penalties = {0.3f, 0.7f, 1};
  greedy_penalised.logprobs = 3;
  add(greedy_penalised, {});
  SamplingParams drawn;
  drawn.temperature = 0.8f;
  drawn.seed = 5;
  drawn.min_p = 0.05f;
  drawn.penalties.repetition = 1.4f;
  drawn.logprobs = 0;
  add(drawn, {{int32_t(rng() % uint32_t(vocab)), 2.0f}});
  add(SamplingParams{}, {{int32_t(rng() % uint32_t(vocab)), -100.0f}});
  add(SamplingParams{}, {});  // plain, in steps that have extras
  std::vector<TestSequence*> order;
  for (Tracked& t : tracked) order.push_back(t.sequence.get());

  auto adjusted = [](std::span<const float> row, const SamplingParams& p, int32_t id) {
    for (const LogitAdjustment& a : p.adjustments) {
      if (a.id == id)
        return adjust_logit(row[size_t(id)], a.bias, a.output_count, a.in_prompt, p.penalties);
    }
    return row[size_t(id)];
  };
  const std::vector<int32_t> placeholder = {-1};
  StepResult expected, got;
  int penalised_changes = 0;
  for (int step = 0; step < 10; ++step) {
    StepBatch real = testing::make_step(order, 4096, true);
    for (size_t i = 0; i < order.size(); ++i) {
      real.sequences[i].sampling.adjustments = tracked[i].table.entries();
    }
    StepBatch fed = real;
    fed.return_logits = false;
    if (step > 0) {
      for (size_t i = 0; i < order.size(); ++i) {
        fed.sequences[i].tokens = placeholder;
        fed.sequences[i].previous_sample_row = int32_t(i);
        fed.sequences[i].sampling.adjustments = tracked[i].before_newest;
      }
    }
    pipelined->submit(fed);
    if (step > 0) {
      pipelined->collect(got);
      EXPECT_EQ(got.next_tokens, expected.next_tokens) << "step " << step;
      ASSERT_EQ(got.logprobs.size(), expected.logprobs.size());
      for (size_t j = 0; j < got.logprobs.size(); ++j) {
        EXPECT_EQ(got.logprobs[j].id, expected.logprobs[j].id) << "step " << step << " entry " << j;
        EXPECT_EQ(got.logprobs[j].logprob, expected.logprobs[j].logprob) << "step " << step;
      }
    }
    stepwise->forward(real, expected);
    ASSERT_EQ(expected.next_tokens.size(), order.size());
    ASSERT_EQ(expected.logprobs.size(), order.size() * kLogprobsStride);
    for (size_t i = 0; i < order.size(); ++i) {
      std::span<const float> row(expected.logits.data() + i * size_t(vocab), size_t(vocab));
      const SamplingParams& p = real.sequences[i].sampling;
      const int32_t token = expected.next_tokens[i];
      if (p.temperature == 0) {
        const int32_t cpu = sample_token(row, p);
        if (cpu != token) {
          EXPECT_NEAR(adjusted(row, p, cpu), adjusted(row, p, token), 1e-5) << "step " << step;
        }
        penalised_changes += i == 0 && cpu != testing::argmax(row);
      }
      const TokenLogprob* gpu = expected.logprobs.data() + i * kLogprobsStride;
      if (p.logprobs < 0) {
        EXPECT_EQ(gpu[0].id, -1);
        continue;
      }
      std::vector<TokenLogprob> cpu(kLogprobsStride);
      token_logprobs(row, token, p.logprobs, cpu);
      for (int j = 0; j <= p.logprobs; ++j) {
        EXPECT_EQ(gpu[j].id, cpu[size_t(j)].id) << "step " << step << " row " << i;
        EXPECT_NEAR(gpu[j].logprob, cpu[size_t(j)].logprob, 1e-4) << "step " << step;
      }
    }
    testing::complete_step(order, real);
    for (size_t i = 0; i < order.size(); ++i) {
      const int32_t token = expected.next_tokens[i];
      tracked[i].before_newest.assign(tracked[i].table.entries().begin(),
                                      tracked[i].table.entries().end());
      tracked[i].table.count_output(token);
      order[i]->tokens.push_back(token);
    }
  }
  pipelined->collect(got);
  EXPECT_EQ(got.next_tokens, expected.next_tokens) << "last step";
  EXPECT_GT(penalised_changes, 0) << "the penalties never changed a greedy pick: nothing tested";
}

// serve's limits reach the runner: decode graphs up to --max-num-seqs, buffers for
// --max-num-batched-tokens (a step beyond them is refused), block tables for --max-model-len.
TEST(CudaRunner, FactoryHonoursTheEngineLimits) {
  RunnerOptions options;
  options.model = "tiny";
  options.device = "cuda";
  options.seed = kSeed;
  options.max_num_batched_tokens = 64;
  options.max_num_seqs = 8;
  options.max_model_len = 256;
  std::unique_ptr<ModelRunner> runner = create_model_runner(options);
  auto* cuda = dynamic_cast<CudaRunner*>(runner.get());
  ASSERT_NE(cuda, nullptr);
  runner->allocate_kv_cache(64, kBlockSize);
  EXPECT_EQ(cuda->graph_buckets().back(), 8);
  std::vector<int32_t> table(17);
  std::iota(table.begin(), table.end(), 0);
  std::vector<int32_t> too_many(65, 3), fits(64, 3);
  StepBatch batch;
  batch.sequences.push_back({too_many, 0, table, true, {}});
  StepResult result;
  EXPECT_THROW(runner->forward(batch, result), RuntimeFailure);  // > max_num_batched_tokens
  batch.sequences[0].tokens = fits;
  batch.sequences[0].start_position = 200;  // reaches 264 > max_model_len
  EXPECT_THROW(runner->forward(batch, result), RuntimeFailure);
  batch.sequences[0].start_position = 0;
  runner->forward(batch, result);
  EXPECT_EQ(result.next_tokens.size(), 1u);
}

// Overlapped launches (kernel_launch.cuh) change when kernels start, never what they compute:
// a runner with them and one without must agree bit for bit, on tiny (simple attention) and on
// tiny widened to head_dim 128 (flash prefill, tiled decode attention and the split merge).
TEST(CudaRunner, OverlappedLaunchesEqualPlainLaunchesBitwise) {
  ModelConfig wide = *find_preset("tiny");
  wide.name = "tiny-head-dim-128";
  wide.head_dim = 128;
  const ModelWeights wide_weights = generate_random_weights(wide, kSeed, 0);
  for (const ModelWeights* weights : {&tiny_weights(), &wide_weights}) {
    std::unique_ptr<CudaRunner> runners[2];
    for (int overlap = 0; overlap < 2; ++overlap) {
      CudaRunnerOptions options = reproducible_options();
      options.kernels.overlap_launches = overlap == 1;
      runners[overlap] = std::make_unique<CudaRunner>(DeviceWeights::upload(*weights), options);
      runners[overlap]->allocate_kv_cache(kNumBlocks, kBlockSize);
    }
    std::printf("overlapped launches (%s): %s\n", weights->config.name.c_str(),
                runners[1]->overlapped_launches() ? "on" : "off (refused or before sm_90)");
    EXPECT_FALSE(runners[0]->overlapped_launches());
    std::mt19937 rng(17);
    BlockCounter blocks(kBlockSize);
    std::vector<std::unique_ptr<TestSequence>> owned;
    std::vector<TestSequence*> all;
    for (int length : {40, 3, 70}) {  // two prompts take the flash kernel (>= 16 rows)
      owned.push_back(std::make_unique<TestSequence>());
      owned.back()->tokens = random_prompt(rng, length, weights->config.vocab_size);
      owned.back()->blocks = blocks.take(length + 16);
      all.push_back(owned.back().get());
    }
    for (int step = 0; step < 10; ++step) {
      StepBatch batch = testing::make_step(all, 4096, true);
      StepResult plain, overlapped;
      runners[0]->forward(batch, plain);
      runners[1]->forward(batch, overlapped);
      EXPECT_EQ(plain.next_tokens, overlapped.next_tokens) << weights->config.name << " step " << step;
      EXPECT_EQ(plain.logits, overlapped.logits) << weights->config.name << " step " << step;
      testing::complete_step(all, batch);
      for (size_t i = 0; i < all.size(); ++i) all[i]->tokens.push_back(plain.next_tokens[i]);
    }
  }
}

TEST(CudaRunner, RejectsInvalidBatchesAndKeepsWorking) {
  CudaRunnerOptions options;
  options.max_model_len = 4096;
  CudaRunner runner(DeviceWeights::upload(tiny_weights()), options);
  std::vector<int32_t> tokens = {1, 2, 3};
  std::vector<int32_t> table = {0};
  StepBatch batch;
  batch.sequences.push_back({tokens, 0, table, true, {}});
  StepResult result;
  EXPECT_THROW(runner.forward(batch, result), RuntimeFailure);  // no KV cache yet
  runner.allocate_kv_cache(64, kBlockSize);
  std::vector<int32_t> bad_tokens = {1, tiny_weights().config.vocab_size};
  StepBatch bad;
  bad.sequences.push_back({bad_tokens, 0, table, true, {}});
  EXPECT_THROW(runner.forward(bad, result), RuntimeFailure);
  std::vector<int32_t> long_tokens(40, 5);  // 40 positions need 3 blocks
  StepBatch short_table;
  short_table.sequences.push_back({long_tokens, 0, table, true, {}});
  EXPECT_THROW(runner.forward(short_table, result), RuntimeFailure);
  std::vector<int32_t> outside = {64};
  StepBatch bad_block;
  bad_block.sequences.push_back({tokens, 0, outside, true, {}});
  EXPECT_THROW(runner.forward(bad_block, result), RuntimeFailure);
  runner.forward(batch, result);
  ASSERT_EQ(result.next_tokens.size(), 1u);
  EXPECT_GE(result.next_tokens[0], 0);
}

TEST(CudaRunner, SeededSamplingIgnoresBatchmatesAndHonoursTopK) {
  auto runner = make_tiny_cuda();
  std::mt19937 rng(5);
  BlockCounter blocks(kBlockSize);
  const int vocab = tiny_weights().config.vocab_size;
  std::vector<int32_t> prompt = random_prompt(rng, 12, vocab);
  SamplingParams sampling;
  sampling.temperature = 0.9f;
  sampling.top_k = 40;
  sampling.top_p = 0.95f;
  sampling.seed = 123;
  auto run = [&](int batchmates) {
    std::vector<std::unique_ptr<TestSequence>> owned;
    std::vector<TestSequence*> active;
    for (int i = 0; i <= batchmates; ++i) {
      owned.push_back(std::make_unique<TestSequence>());
      owned.back()->tokens = i == 0 ? prompt : random_prompt(rng, 5 + i, vocab);
      owned.back()->blocks = blocks.take(32);
      owned.back()->sampling = sampling;
      owned.back()->sampling.seed = i == 0 ? 123 : 1000 + uint64_t(i);
      active.push_back(owned.back().get());
    }
    StepBatch batch = testing::make_step(active, 4096, true);
    StepResult result;
    runner->forward(batch, result);
    std::span<const float> row(result.logits.data(), size_t(vocab));
    std::vector<float> sorted(row.begin(), row.end());
    std::nth_element(sorted.begin(), sorted.begin() + 39, sorted.end(), std::greater<float>());
    EXPECT_GE(row[size_t(result.next_tokens[0])], sorted[39]) << "sampled outside the top 40";
    return result.next_tokens[0];
  };
  int32_t alone = run(0);
  EXPECT_EQ(alone, run(3));
  EXPECT_EQ(alone, run(7));

  sampling.top_k = 1;  // top-1 is greedy whatever the temperature
  std::vector<std::unique_ptr<TestSequence>> owned;
  owned.push_back(std::make_unique<TestSequence>());
  owned[0]->tokens = prompt;
  owned[0]->blocks = blocks.take(32);
  owned[0]->sampling = sampling;
  StepBatch batch = testing::make_step({owned[0].get()}, 4096, true);
  StepResult result;
  runner->forward(batch, result);
  EXPECT_EQ(result.next_tokens[0], testing::argmax(std::span<const float>(result.logits)));
}

TEST(CudaRunner, MemoryAccountingAndUsableSms) {
  CudaRunnerOptions options;
  options.max_model_len = 4096;
  CudaRunner runner(DeviceWeights::upload(tiny_weights()), options);
  const ModelConfig& c = tiny_weights().config;
  EXPECT_EQ(runner.kv_block_bytes(16),
            uint64_t(c.num_layers) * 2 * 16 * uint64_t(c.kv_width()) * 2);
  uint64_t before = runner.available_memory_bytes();
  ASSERT_GT(before, 0u);
  EXPECT_LT(before, device_memory_info().free_bytes);
  const int blocks = 4096;
  runner.allocate_kv_cache(blocks, 16);
  uint64_t after = runner.available_memory_bytes();
  EXPECT_LE(after + uint64_t(blocks) * runner.kv_block_bytes(16), before);

  std::printf("usable SMs: %d\n", runner.sm_count());
  EXPECT_GT(runner.sm_count(), 0);
  // Under MPS with an active-thread percentage the runner must see (and size grids to) fewer SMs.
  if (const char* at_most = std::getenv("GPUFRAC_EXPECT_SMS_AT_MOST")) {
    EXPECT_LE(runner.sm_count(), std::atoi(at_most));
  }
}

}  // namespace
}  // namespace gpufrac::engine
