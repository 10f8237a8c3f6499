// The sampling fields through the Engine on the CPU runner (the tiny preset): logit_bias and the
// penalties change what is generated, seeded draws do not depend on what shares a step, and a
// pipelined engine — step n+1 submitted before step n is collected, its placeholders resolved by
// the runner and counted by the penalties — generates exactly what a step-at-a-time engine does,
// logprobs included.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <vector>

#include "collecting_sink.h"
#include "engine/cpu/cpu_runner.h"
#include "engine/engine.h"
#include "engine/model/presets.h"

namespace gpufrac::engine {
namespace {

using testing::CollectingSink;

const ModelWeights& tiny_weights() {
  static const ModelWeights weights = generate_random_weights(*find_preset("tiny"), 7, 2);
  return weights;
}

// The CPU runner claiming to run ahead, so that the engine pipelines its steps through it (its
// SynchronousRunner base resolves the placeholders).
class RunningAhead : public ModelRunner {
 public:
  explicit RunningAhead(ModelRunner& inner) : inner_(inner) {}
  const ModelConfig& config() const override { return inner_.config(); }
  std::string device_name() const override { return inner_.device_name(); }
  uint64_t available_memory_bytes() const override { return inner_.available_memory_bytes(); }
  uint64_t kv_block_bytes(int block_size) const override {
    return inner_.kv_block_bytes(block_size);
  }
  void allocate_kv_cache(int num_blocks, int block_size) override {
    inner_.allocate_kv_cache(num_blocks, block_size);
  }
  void submit(const StepBatch& batch) override { inner_.submit(batch); }
  void collect(StepResult& result) override { inner_.collect(result); }
  bool runs_ahead() const override { return true; }

 private:
  ModelRunner& inner_;
};

EngineRequest request(int salt) {
  EngineRequest r;
  for (int i = 0; i < 5; ++i) r.prompt.push_back(100 + salt * 17 + i * 31);
  r.stop.max_tokens = 24;
  r.stop.ignore_eos = true;
  r.temperature = 0;
  return r;
}

struct Generated {
  std::vector<std::vector<int32_t>> tokens;                      // per request
  std::vector<std::vector<std::vector<TokenLogprob>>> logprobs;  // per request, per token
};

// Every request submitted at once (they share steps); what each generated.
Generated generate_with_logprobs(ModelRunner& runner, const std::vector<EngineRequest>& requests) {
  EngineOptions options;
  options.num_kv_blocks = 64;
  options.block_size = 16;
  options.max_model_len = 256;
  Engine engine(runner, options);
  engine.start();
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (const EngineRequest& r : requests) {
    sinks.push_back(std::make_shared<CollectingSink>());
    EXPECT_EQ(engine.submit(engine.new_request_id(), r, sinks.back()),
              Engine::Admission::kAccepted);
  }
  Generated out;
  for (auto& sink : sinks) {
    EXPECT_TRUE(sink->wait());
    EXPECT_EQ(sink->outcome().reason, FinishReason::kLength);
    out.tokens.push_back(sink->tokens());
    out.logprobs.push_back(sink->logprobs());
  }
  return out;
}

std::vector<std::vector<int32_t>> generate(ModelRunner& runner,
                                           const std::vector<EngineRequest>& requests) {
  return generate_with_logprobs(runner, requests).tokens;
}

size_t distinct(const std::vector<int32_t>& tokens) {
  return std::set<int32_t>(tokens.begin(), tokens.end()).size();
}

TEST(EngineSampling, PenaltiesAndLogitBiasThroughAPipelinedEngineEqualStepwise) {
  std::vector<EngineRequest> requests;
  requests.push_back(request(0));  // greedy, nothing adjusted: the baseline
  EngineRequest frequency = request(0);
  frequency.penalties = {0.5f, 1.0f, 1};
  requests.push_back(frequency);
  EngineRequest repetition = request(0);
  repetition.penalties.repetition = 1.8f;
  requests.push_back(repetition);
  EngineRequest biased = request(0);
  biased.logit_bias = {{4242, 100.0f}};
  requests.push_back(biased);
  EngineRequest drawn = request(1);
  drawn.temperature = 0.9f;
  drawn.seed = 11;
  drawn.min_p = 0.05f;
  drawn.top_k = 40;
  drawn.penalties = {0.4f, 0.2f, 1.1f};
  drawn.logit_bias = {{7, -100.0f}, {9, 2.5f}};
  requests.push_back(drawn);

  std::unique_ptr<ModelRunner> cpu = make_cpu_runner(tiny_weights(), 2);
  std::vector<std::vector<int32_t>> stepwise = generate(*cpu, requests);
  std::unique_ptr<ModelRunner> inner = make_cpu_runner(tiny_weights(), 2);
  RunningAhead ahead(*inner);
  std::vector<std::vector<int32_t>> pipelined = generate(ahead, requests);
  EXPECT_EQ(pipelined, stepwise);

  const std::vector<int32_t>& baseline = stepwise[0];
  EXPECT_NE(stepwise[1], baseline);
  EXPECT_GT(distinct(stepwise[1]), distinct(baseline)) << "penalised tokens repeat less";
  EXPECT_NE(stepwise[2], baseline);
  EXPECT_GT(distinct(stepwise[2]), distinct(baseline));
  EXPECT_EQ(stepwise[3], std::vector<int32_t>(24, 4242)) << "a +100 bias wins every greedy pick";
  EXPECT_EQ(std::set<int32_t>(stepwise[4].begin(), stepwise[4].end()).count(7), 0u);
  EXPECT_GT(distinct(stepwise[4]), 3u);
}

TEST(EngineSampling, LogprobsReachTheSinkForEveryTokenPipelinedOrNot) {
  EngineRequest top3 = request(5);
  top3.logprobs = 3;
  top3.temperature = 1;
  top3.seed = 2;
  EngineRequest sampled_only = request(6);
  sampled_only.logprobs = 0;
  sampled_only.penalties.presence = 1;  // logprobs stay those of the raw logits
  std::vector<EngineRequest> requests = {top3, sampled_only, request(7)};
  std::unique_ptr<ModelRunner> cpu = make_cpu_runner(tiny_weights(), 2);
  Generated stepwise = generate_with_logprobs(*cpu, requests);
  std::unique_ptr<ModelRunner> inner = make_cpu_runner(tiny_weights(), 2);
  RunningAhead ahead(*inner);
  Generated pipelined = generate_with_logprobs(ahead, requests);
  EXPECT_EQ(pipelined.tokens, stepwise.tokens);
  for (size_t r = 0; r < requests.size(); ++r) {
    ASSERT_EQ(stepwise.logprobs[r].size(), 24u);
    for (size_t t = 0; t < 24; ++t) {
      const std::vector<TokenLogprob>& got = stepwise.logprobs[r][t];
      ASSERT_EQ(got.size(), size_t(requests[r].logprobs + 1)) << "request " << r;
      if (got.empty()) continue;
      EXPECT_EQ(got[0].id, stepwise.tokens[r][t]);
      EXPECT_LE(got[0].logprob, 0.0f);
      for (size_t j = 2; j < got.size(); ++j) EXPECT_GE(got[j - 1].logprob, got[j].logprob);
      for (size_t j = 0; j < got.size(); ++j) {
        EXPECT_EQ(pipelined.logprobs[r][t][j].id, got[j].id);
        EXPECT_EQ(pipelined.logprobs[r][t][j].logprob, got[j].logprob);
      }
    }
  }
}

TEST(EngineSampling, SeededDrawsDoNotDependOnBatchmates) {
  EngineRequest seeded = request(2);
  seeded.temperature = 1;
  seeded.seed = 7;
  seeded.top_p = 0.9f;
  seeded.penalties.presence = 0.3f;
  std::unique_ptr<ModelRunner> cpu = make_cpu_runner(tiny_weights(), 2);
  std::vector<std::vector<int32_t>> alone = generate(*cpu, {seeded});
  std::vector<EngineRequest> crowd = {request(3), seeded, request(4), seeded};
  crowd[0].temperature = 1;
  std::vector<std::vector<int32_t>> together = generate(*cpu, crowd);
  EXPECT_EQ(together[1], alone[0]);
  EXPECT_EQ(together[3], alone[0]);
  EXPECT_GT(distinct(alone[0]), 3u);
}

}  // namespace
}  // namespace gpufrac::engine
