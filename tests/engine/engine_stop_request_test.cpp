// Engine::stop_request, the early finish the server uses when a stop string matches: called from
// a sink's on_token it ends the request as kStop with no further token delivered (a step already
// submitted may compute one more, which is dropped), one on_finish, blocks freed, counted as
// "stop"; ids that are unknown or already finished are
// ignored; and under load, with stops from sinks and cancels from another thread racing the
// steps, every request finishes exactly once and every KV block comes back.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "collecting_sink.h"
#include "engine/engine.h"
#include "fakes/fake_runner.h"

namespace gpufrac::engine {
namespace {

using namespace std::chrono_literals;

using testing::CollectingSink;

// A sink that calls stop_request from on_token once it has seen `stop_after` tokens (0: never).
std::shared_ptr<CollectingSink> stopping_sink(Engine& engine, uint64_t id, int stop_after) {
  return std::make_shared<CollectingSink>([&engine, id, stop_after](int tokens) {
    if (tokens == stop_after) engine.stop_request(id);
  });
}

int token_count(CollectingSink& sink) { return int(sink.tokens().size()); }

EngineOptions options(int num_blocks) {
  EngineOptions o;
  o.num_kv_blocks = num_blocks;
  o.block_size = 4;
  o.max_model_len = 128;
  // Optimistic admission: the races below must also meet preemptions.
  o.scheduler = {.admission = KvAdmission::kOptimistic, .max_num_seqs = 32,
                 .max_num_batched_tokens = 128};
  return o;
}

EngineRequest request(int salt, int max_tokens) {
  EngineRequest r;
  for (int i = 0; i < 5 + salt % 7; ++i) r.prompt.push_back((i * 31 + salt * 17) % 900);
  r.stop.max_tokens = max_tokens;
  r.stop.ignore_eos = true;
  r.temperature = 0;
  return r;
}

bool blocks_reach_zero(const Engine& engine) {
  for (int i = 0; i < 2000; ++i) {
    if (engine.metrics().kv_cache_blocks_used == 0 && engine.metrics().num_requests_running == 0) {
      return true;
    }
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

TEST(EngineStopRequest, FromOnTokenEndsTheRequestAsStopWithNoFurtherToken) {
  fakes::FakeRunner runner;
  Engine engine(runner, options(64));
  engine.start();
  uint64_t id = engine.new_request_id();
  auto sink = stopping_sink(engine, id, 3);
  ASSERT_EQ(engine.submit(id, request(1, 50), sink), Engine::Admission::kAccepted);
  ASSERT_TRUE(sink->wait());
  EXPECT_EQ(token_count(*sink), 3) << "no token after the stop";
  EXPECT_EQ(sink->finishes(), 1);
  EXPECT_EQ(sink->outcome().reason, FinishReason::kStop);
  EXPECT_EQ(sink->outcome().completion_tokens, 3);
  EXPECT_TRUE(blocks_reach_zero(engine));
  EXPECT_EQ(engine.metrics().requests_finished_stop, 1);
  EXPECT_EQ(engine.metrics().requests_finished_abort, 0);
  // Unknown and finished ids are ignored; the engine keeps serving.
  engine.stop_request(id);
  engine.stop_request(987654);
  uint64_t next = engine.new_request_id();
  auto plain = stopping_sink(engine, next, 0);
  ASSERT_EQ(engine.submit(next, request(2, 6), plain), Engine::Admission::kAccepted);
  ASSERT_TRUE(plain->wait());
  EXPECT_EQ(plain->outcome().reason, FinishReason::kLength);
  EXPECT_EQ(token_count(*plain), 6);
}

TEST(EngineStopRequest, StopOnTheLastTokenKeepsTheEnginesReason) {
  fakes::FakeRunner runner;
  Engine engine(runner, options(64));
  engine.start();
  uint64_t id = engine.new_request_id();
  auto sink = stopping_sink(engine, id, 4);
  ASSERT_EQ(engine.submit(id, request(3, 4), sink), Engine::Admission::kAccepted);
  ASSERT_TRUE(sink->wait());
  EXPECT_EQ(sink->outcome().reason, FinishReason::kLength) << "finished in the same step";
  EXPECT_EQ(sink->finishes(), 1);
  std::this_thread::sleep_for(20ms);  // the late stop_request reaches the loop and is ignored
  EXPECT_EQ(sink->finishes(), 1);
  EXPECT_TRUE(blocks_reach_zero(engine));
}

TEST(EngineStopRequest, StopsAndCancelsRacingUnderKvPressureFinishEveryRequestOnce) {
  fakes::FakeRunnerOptions runner_options;
  runner_options.step_time = 100us;
  fakes::FakeRunner runner(runner_options);
  Engine engine(runner, options(48));  // too few blocks for all: preemptions happen
  engine.start();
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 96; ++i) {
    uint64_t id = engine.new_request_id();
    auto sink = stopping_sink(engine, id, i % 4 == 0 ? 0 : 1 + i % 23);
    ASSERT_EQ(engine.submit(id, request(i, 30), sink), Engine::Admission::kAccepted);
    sinks.push_back(sink);
    ids.push_back(id);
  }
  std::thread canceller([&] {
    for (size_t i = 0; i < ids.size(); i += 5) {
      engine.cancel(ids[i]);
      engine.stop_request(ids[(i + 2) % ids.size()]);
      std::this_thread::sleep_for(300us);
    }
  });
  canceller.join();
  for (auto& sink : sinks) ASSERT_TRUE(sink->wait());
  int stops = 0;
  for (size_t i = 0; i < sinks.size(); ++i) {
    EXPECT_EQ(sinks[i]->finishes(), 1) << i;
    RequestOutcome o = sinks[i]->outcome();
    EXPECT_EQ(o.completion_tokens, token_count(*sinks[i])) << i;
    EXPECT_LE(token_count(*sinks[i]), 30) << i;
    stops += o.reason == FinishReason::kStop;
  }
  EXPECT_GT(stops, 0);
  EXPECT_TRUE(blocks_reach_zero(engine));
  EXPECT_GT(engine.metrics().num_preemptions_total, 0);
}

}  // namespace
}  // namespace gpufrac::engine
