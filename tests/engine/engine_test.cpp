#include "engine/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "collecting_sink.h"
#include "fakes/fake_runner.h"

namespace gpufrac::engine {
namespace {

using namespace std::chrono_literals;

using testing::CollectingSink;

EngineOptions small_engine(int num_blocks, int block_size = 4) {
  EngineOptions o;
  o.num_kv_blocks = num_blocks;
  o.block_size = block_size;
  o.max_model_len = 128;
  o.scheduler = {.max_num_seqs = 16, .max_num_batched_tokens = 64};
  return o;
}

// Elastic KV on the fake runner: a pool of 64 blocks backed in chunks of 4, at most
// *device_blocks of them (null: the whole pool); idle chunks go back after release_delay_ms.
fakes::FakeRunnerOptions elastic_runner(std::atomic<int>* device_blocks = nullptr) {
  fakes::FakeRunnerOptions ro;
  ro.elastic_chunk_blocks = 4;
  ro.elastic_limit_blocks = device_blocks;
  return ro;
}
EngineOptions elastic_engine(int64_t release_delay_ms) {
  EngineOptions o = small_engine(64);
  o.elastic_kv = true;
  o.kv_release_delay_ms = release_delay_ms;
  return o;
}

EngineRequest request(std::vector<int32_t> prompt, int max_tokens) {
  EngineRequest r;
  r.prompt = std::move(prompt);
  r.stop.max_tokens = max_tokens;
  r.temperature = 0;
  return r;
}

std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 7 + salt * 13) % 900);
  return p;
}

// One request alone on a roomy engine: the reference its tokens must match under any load.
std::vector<int32_t> solo_tokens(const EngineRequest& r) {
  fakes::FakeRunner runner;
  Engine engine(runner, small_engine(64));
  engine.start();
  auto sink = std::make_shared<CollectingSink>();
  EXPECT_EQ(engine.submit(engine.new_request_id(), r, sink), Engine::Admission::kAccepted);
  EXPECT_TRUE(sink->wait());
  return sink->tokens();
}

TEST(Engine, OutputDoesNotDependOnBatchingChunkingOrPreemption) {
  fakes::FakeRunner runner;
  EngineOptions o = small_engine(40);  // 160 token slots for 24 requests of up to ~90 tokens
  o.scheduler.max_num_batched_tokens = 24;
  o.scheduler.admission = KvAdmission::kOptimistic;  // so that preemptions happen
  Engine engine(runner, o);
  std::vector<EngineRequest> requests;
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (int i = 0; i < 24; ++i) {
    requests.push_back(request(prompt_of(10 + i * 2, i), 20 + i));
    sinks.push_back(std::make_shared<CollectingSink>());
    ASSERT_EQ(engine.submit(engine.new_request_id(), requests.back(), sinks.back()),
              Engine::Admission::kAccepted);
  }
  engine.start();  // after every submit: all 24 arrive at once however busy the machine is
  for (int i = 0; i < 24; ++i) {
    ASSERT_TRUE(sinks[i]->wait());
    RequestOutcome out = sinks[i]->outcome();
    EXPECT_EQ(out.reason, FinishReason::kLength);
    EXPECT_EQ(out.completion_tokens, 20 + i);
    EXPECT_EQ(out.prompt_tokens, 10 + i * 2);
    EXPECT_EQ(sinks[i]->tokens(), solo_tokens(requests[i])) << "request " << i;
  }
  engine.stop();
  EXPECT_GT(engine.metrics().num_preemptions_total.load(), 0u) << "the pool was meant to be short";
  EXPECT_EQ(engine.metrics().kv_cache_blocks_used.load(), 0);
  EXPECT_EQ(engine.metrics().generation_tokens_total.load(), uint64_t(24 * 20 + 24 * 23 / 2));
  EXPECT_EQ(engine.metrics().time_to_first_token.count(), 24u);
}

// One request of 5 tokens on a runner that does or does not run ahead: the tokens its sink
// holds as each step starts. No step runs past max_tokens: prefill + 4 decodes for 5 tokens.
std::vector<size_t> delivered_as_each_step_starts(bool runs_ahead) {
  auto sink = std::make_shared<CollectingSink>();
  std::mutex mutex;
  std::vector<size_t> delivered_at_step;
  fakes::FakeRunnerOptions watching;
  watching.runs_ahead = runs_ahead;
  watching.on_step = [&](const StepBatch&) {
    std::lock_guard lock(mutex);
    delivered_at_step.push_back(sink->tokens().size());
  };
  fakes::FakeRunner runner(watching);
  Engine engine(runner, small_engine(64));
  engine.start();
  EngineRequest r = request(prompt_of(4, 5), 5);
  EXPECT_EQ(engine.submit(engine.new_request_id(), r, sink), Engine::Admission::kAccepted);
  EXPECT_TRUE(sink->wait());
  EXPECT_EQ(sink->tokens(), solo_tokens(r));
  EXPECT_EQ(sink->outcome().completion_tokens, 5);
  EXPECT_EQ(runner.steps(), 5);
  engine.stop();
  std::lock_guard lock(mutex);
  return delivered_at_step;
}

TEST(Engine, NextStepIsSubmittedBeforeTheLastOnesTokensAreDelivered) {
  // A runner that runs ahead (CUDA): step n+1 starts while step n's token is undelivered.
  EXPECT_EQ(delivered_as_each_step_starts(true), (std::vector<size_t>{0, 0, 1, 2, 3}));
}

TEST(Engine, ARunnerThatComputesInSubmitGetsEachTokenDeliveredBeforeTheNextStep) {
  // A runner that computes in submit() (CPU): no token waits for the next step.
  EXPECT_EQ(delivered_as_each_step_starts(false), (std::vector<size_t>{0, 1, 2, 3, 4}));
}

TEST(Engine, MinTokensSuppressesEosAndIgnoreEosRunsToMaxTokens) {
  fakes::FakeRunnerOptions eos_always;
  eos_always.eos_one_in = 1;  // EOS whenever it is allowed
  fakes::FakeRunner runner(eos_always);
  Engine engine(runner, small_engine(64));
  engine.start();
  auto run = [&](int min_tokens, bool ignore_eos) {
    EngineRequest r = request(prompt_of(5, 1), 10);
    r.stop.min_tokens = min_tokens;
    r.stop.ignore_eos = ignore_eos;
    auto sink = std::make_shared<CollectingSink>();
    engine.submit(engine.new_request_id(), r, sink);
    EXPECT_TRUE(sink->wait());
    return sink;
  };
  auto eos_at_once = run(0, false);
  EXPECT_EQ(eos_at_once->tokens(), std::vector<int32_t>{runner.eos_token()});
  EXPECT_EQ(eos_at_once->outcome().reason, FinishReason::kStop);
  // The step after the EOS already ran for it (pipelining): its token is not counted.
  EXPECT_EQ(eos_at_once->outcome().completion_tokens, 1);
  auto after_min = run(4, false);
  ASSERT_EQ(after_min->tokens().size(), 5u);
  EXPECT_EQ(after_min->tokens().back(), runner.eos_token());
  for (int i = 0; i < 4; ++i) EXPECT_NE(after_min->tokens()[i], runner.eos_token());
  auto ignoring = run(0, true);
  EXPECT_EQ(ignoring->tokens().size(), 10u);
  EXPECT_EQ(ignoring->outcome().reason, FinishReason::kLength);
}

TEST(Engine, StopTokenIdsEndTheRequest) {
  EngineRequest r = request(prompt_of(6, 3), 12);
  std::vector<int32_t> reference = solo_tokens(r);
  ASSERT_EQ(reference.size(), 12u);
  r.stop.stop_token_ids = {reference[4]};
  std::vector<int32_t> stopped = solo_tokens(r);
  size_t first = std::find(reference.begin(), reference.end(), reference[4]) - reference.begin();
  EXPECT_EQ(stopped, std::vector<int32_t>(reference.begin(), reference.begin() + first + 1));
}

TEST(Engine, SeedFixesSampledOutput) {
  EngineRequest r = request(prompt_of(6, 4), 8);
  r.temperature = 0.8f;
  r.seed = 42;
  std::vector<int32_t> a = solo_tokens(r);
  EXPECT_EQ(a, solo_tokens(r));
  r.seed = 43;
  EXPECT_NE(a, solo_tokens(r));
}

TEST(Engine, NChoicesAreSeededSequencesOfOnePromptWithOneFinish) {
  fakes::FakeRunner runner;
  Engine engine(runner, small_engine(64));
  engine.start();
  EngineRequest r = request(prompt_of(6, 9), 7);
  r.temperature = 1;
  r.seed = 100;
  r.n = 3;
  auto sink = std::make_shared<CollectingSink>();
  const uint64_t id = engine.new_request_id(3);
  EXPECT_EQ(engine.new_request_id(), id + 3) << "the three choice ids are reserved";
  ASSERT_EQ(engine.submit(id, r, sink), Engine::Admission::kAccepted);
  ASSERT_TRUE(sink->wait());
  EXPECT_EQ(sink->finishes(), 1);
  EXPECT_EQ(sink->outcome().reason, FinishReason::kLength);
  EXPECT_EQ(sink->outcome().prompt_tokens, 6);
  EXPECT_EQ(sink->outcome().completion_tokens, 21);
  std::vector<std::vector<int32_t>> choices;
  for (int c = 0; c < 3; ++c) {
    EngineRequest alone = r;
    alone.n = 1;
    alone.seed = 100 + uint64_t(c);  // choice c draws as a request seeded seed + c
    choices.push_back(sink->tokens_of(c));
    EXPECT_EQ(choices.back(), solo_tokens(alone)) << "choice " << c;
  }
  EXPECT_NE(choices[0], choices[1]);
  EXPECT_EQ(sink->tokens().size(), 21u);
  EXPECT_EQ(engine.metrics().kv_cache_blocks_used.load(), 0);
}

TEST(Engine, StopRequestEndsOneChoiceAndCancelEndsThemAll) {
  fakes::FakeRunnerOptions slow;
  slow.step_time = 1ms;
  fakes::FakeRunner runner(slow);
  Engine engine(runner, small_engine(64));
  engine.start();
  EngineRequest r = request(prompt_of(4, 3), 100);
  r.n = 2;
  const uint64_t id = engine.new_request_id(2);
  // Choice 1 asks to stop at its 2nd token, from on_token, as the server's stop strings do.
  std::shared_ptr<CollectingSink> sink;
  sink = std::make_shared<CollectingSink>([&engine, id, &sink](int) {
    if (sink->tokens_of(1).size() == 2) engine.stop_request(id + 1);
  });
  ASSERT_EQ(engine.submit(id, r, sink), Engine::Admission::kAccepted);
  for (int i = 0; i < 500 && sink->tokens_of(0).size() < 10; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_GE(sink->tokens_of(0).size(), 10u);
  EXPECT_EQ(sink->tokens_of(1).size(), 2u) << "the stopped choice got nothing more";
  EXPECT_EQ(sink->finishes(), 0) << "choice 0 still runs";
  engine.cancel(id);
  ASSERT_TRUE(sink->wait());
  EXPECT_EQ(sink->finishes(), 1);
  EXPECT_EQ(sink->outcome().reason, FinishReason::kCancelled);
  EXPECT_EQ(sink->outcome().completion_tokens, int64_t(sink->tokens().size()));
  for (int i = 0; i < 500 && engine.metrics().kv_cache_blocks_used.load() != 0; ++i) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(engine.metrics().kv_cache_blocks_used.load(), 0);
}

TEST(Engine, CancelFreesBlocksOfRunningAndWaitingRequests) {
  fakes::FakeRunnerOptions slow;
  slow.step_time = 2ms;
  fakes::FakeRunner runner(slow);
  EngineOptions o = small_engine(64);
  o.scheduler.max_num_seqs = 2;
  Engine engine(runner, o);
  engine.start();
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 4; ++i) {
    sinks.push_back(std::make_shared<CollectingSink>());
    ids.push_back(engine.new_request_id());
    engine.submit(ids.back(), request(prompt_of(20, i), 100), sinks.back());
  }
  // Wait until the two running ones have produced tokens; the other two are waiting.
  for (int i = 0; i < 500 && sinks[1]->tokens().size() < 3; ++i) std::this_thread::sleep_for(2ms);
  ASSERT_GE(sinks[1]->tokens().size(), 3u);
  EXPECT_GT(engine.metrics().kv_cache_blocks_used.load(), 0);
  for (uint64_t id : ids) engine.cancel(id);
  for (auto& s : sinks) {
    ASSERT_TRUE(s->wait());
    EXPECT_EQ(s->outcome().reason, FinishReason::kCancelled);
  }
  for (int i = 0; i < 500 && engine.metrics().kv_cache_blocks_used.load() != 0; ++i) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(engine.metrics().kv_cache_blocks_used.load(), 0);
  EXPECT_EQ(engine.metrics().requests_finished_abort.load(), 4u);
  engine.cancel(ids[0]);  // already gone: ignored
  for (auto& s : sinks) EXPECT_EQ(s->finishes(), 1);
}

TEST(Engine, WaitingQueueCapRefusesExcessRequests) {
  std::mutex gate;
  gate.lock();  // the first step blocks until released, so requests pile up
  fakes::FakeRunnerOptions gated;
  gated.on_step = [&](const StepBatch&) { std::lock_guard hold(gate); };
  fakes::FakeRunner runner(gated);
  EngineOptions o = small_engine(64);
  o.scheduler.max_num_seqs = 1;
  o.max_waiting_requests = 3;
  Engine engine(runner, o);
  engine.start();
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  int accepted = 0, refused = 0;
  for (int i = 0; i < 8; ++i) {
    sinks.push_back(std::make_shared<CollectingSink>());
    auto result = engine.submit(engine.new_request_id(), request(prompt_of(4, i), 2), sinks.back());
    (result == Engine::Admission::kAccepted ? accepted : refused)++;
    if (i == 0) std::this_thread::sleep_for(20ms);  // let the first one start its step
  }
  gate.unlock();
  EXPECT_EQ(accepted, 4);  // one running + three waiting
  EXPECT_EQ(refused, 4);
  EXPECT_EQ(engine.metrics().requests_rejected_total.load(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(sinks[i]->wait());
  for (int i = 4; i < 8; ++i) EXPECT_EQ(sinks[i]->finishes(), 0);
}

TEST(Engine, RunnerFailureFailsThatStepsRequestsOnly) {
  std::atomic<bool> fail{true};
  fakes::FakeRunnerOptions failing;
  failing.on_step = [&](const StepBatch&) {
    if (fail.exchange(false)) throw std::runtime_error("device lost");
  };
  fakes::FakeRunner runner(failing);
  Engine engine(runner, small_engine(64));
  engine.start();
  auto first = std::make_shared<CollectingSink>();
  engine.submit(engine.new_request_id(), request(prompt_of(4, 1), 3), first);
  ASSERT_TRUE(first->wait());
  EXPECT_EQ(first->outcome().reason, FinishReason::kError);
  EXPECT_NE(first->outcome().error.find("device lost"), std::string::npos);
  auto second = std::make_shared<CollectingSink>();
  engine.submit(engine.new_request_id(), request(prompt_of(4, 2), 3), second);
  ASSERT_TRUE(second->wait());
  EXPECT_EQ(second->outcome().reason, FinishReason::kLength);
  EXPECT_EQ(engine.metrics().kv_cache_blocks_used.load(), 0);
}

TEST(Engine, InvalidRequestsAreRejectedBeforeQueueing) {
  fakes::FakeRunner runner;
  Engine engine(runner, small_engine(64));
  auto sink = std::make_shared<CollectingSink>();
  EXPECT_THROW(engine.submit(1, request({}, 4), sink), std::invalid_argument);
  EXPECT_THROW(engine.submit(1, request({1000}, 4), sink), std::invalid_argument);
  EXPECT_THROW(engine.submit(1, request(prompt_of(100, 0), 29), sink), std::invalid_argument);
}

TEST(Engine, StopCancelsWhatIsInFlight) {
  fakes::FakeRunnerOptions slow;
  slow.step_time = 1ms;
  fakes::FakeRunner runner(slow);
  auto engine = std::make_unique<Engine>(runner, small_engine(64));
  engine->start();
  auto sink = std::make_shared<CollectingSink>();
  engine->submit(engine->new_request_id(), request(prompt_of(4, 1), 100), sink);
  std::this_thread::sleep_for(10ms);
  engine.reset();
  EXPECT_EQ(sink->finishes(), 1);
  EXPECT_EQ(sink->outcome().reason, FinishReason::kCancelled);
}

// Elastic KV: a pool of 64 blocks of which the "device" backs at most 12 (chunks of 4), while
// 6 requests needing 6 blocks each arrive at once: they wait for memory instead of failing,
// the backing never passes the limit, every output equals the request's solo run, and once the
// engine is idle its chunks go back.
TEST(Engine, ElasticKvWaitsForMemoryAndGivesIdleChunksBack) {
  std::atomic<int> device_blocks{12};
  fakes::FakeRunner runner(elastic_runner(&device_blocks));
  Engine engine(runner, elastic_engine(50));
  EXPECT_EQ(runner.backed_blocks(), 0);
  std::vector<EngineRequest> requests;
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (int i = 0; i < 6; ++i) {
    requests.push_back(request(prompt_of(16, i), 8));  // 24 tokens: 6 blocks of 4
    sinks.push_back(std::make_shared<CollectingSink>());
    ASSERT_EQ(engine.submit(engine.new_request_id(), requests.back(), sinks.back()),
              Engine::Admission::kAccepted);
  }
  // Started after the submits, so all 6 wait at once: started before, a busy machine can let
  // the engine finish each request before the next arrives and never reach the limit.
  engine.start();
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(sinks[size_t(i)]->wait());
    EXPECT_EQ(sinks[size_t(i)]->outcome().reason, FinishReason::kLength);
    EXPECT_EQ(sinks[size_t(i)]->tokens(), solo_tokens(requests[size_t(i)])) << "request " << i;
  }
  EXPECT_EQ(runner.most_backed_blocks(), 12);
  EXPECT_GT(engine.metrics().kv_backing_refusals_total.load(), 0u);
  EXPECT_EQ(engine.metrics().num_preemptions_total.load(), 0u);
  for (int i = 0; i < 200 && runner.backed_blocks() > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(runner.backed_blocks(), 0);
  EXPECT_EQ(engine.metrics().kv_cache_blocks_backed.load(), 0);
  // Memory comes back for the next request.
  auto sink = std::make_shared<CollectingSink>();
  ASSERT_EQ(engine.submit(engine.new_request_id(), requests[0], sink), Engine::Admission::kAccepted);
  ASSERT_TRUE(sink->wait());
  EXPECT_EQ(sink->tokens(), solo_tokens(requests[0]));
}

// A request the device has no memory for waits holding none of it: what could be mapped toward
// its need goes back at once (engines that each held part of the memory while waiting for the
// rest would wait for each other forever). Once the memory is there, the request runs.
TEST(Engine, ElasticKvWaitsHoldingNothing) {
  std::atomic<int> device_blocks{8};
  fakes::FakeRunner runner(elastic_runner(&device_blocks));
  Engine engine(runner, elastic_engine(2000));
  engine.start();
  auto sink = std::make_shared<CollectingSink>();
  EngineRequest twelve_blocks = request(prompt_of(40, 3), 8);  // 48 tokens: 12 blocks of 4
  ASSERT_EQ(engine.submit(engine.new_request_id(), twelve_blocks, sink),
            Engine::Admission::kAccepted);
  for (int i = 0; i < 100 && engine.metrics().kv_backing_refusals_total.load() < 3; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_GE(engine.metrics().kv_backing_refusals_total.load(), 3u);
  EXPECT_EQ(sink->finishes(), 0);
  EXPECT_EQ(runner.backed_blocks(), 0);
  EXPECT_EQ(runner.most_backed_blocks(), 8);  // mapped, then given back
  device_blocks = 12;
  ASSERT_TRUE(sink->wait());
  EXPECT_EQ(sink->tokens(), solo_tokens(twelve_blocks));
}

// A busy engine keeps its chunks: nothing is released while steps run back to back.
TEST(Engine, ElasticKvKeepsItsChunksUnderSteadyLoad) {
  fakes::FakeRunnerOptions ro = elastic_runner();
  ro.step_time = std::chrono::microseconds(500);
  fakes::FakeRunner* self = nullptr;
  std::atomic<int> last_backed{0};
  std::atomic<bool> shrank{false};
  ro.on_step = [&](const StepBatch&) {
    int backed = self->backed_blocks();
    if (backed < last_backed.exchange(backed)) shrank = true;
  };
  fakes::FakeRunner runner(ro);
  self = &runner;
  Engine engine(runner, elastic_engine(1));
  engine.start();
  auto sink = std::make_shared<CollectingSink>();
  ASSERT_EQ(engine.submit(engine.new_request_id(), request(prompt_of(16, 1), 100), sink),
            Engine::Admission::kAccepted);
  ASSERT_TRUE(sink->wait());
  EXPECT_EQ(sink->tokens().size(), 100u);
  EXPECT_EQ(runner.most_backed_blocks(), 32);  // 116 tokens: 29 blocks, in chunks of 4
  EXPECT_FALSE(shrank.load());
}

}  // namespace
}  // namespace gpufrac::engine
