// The CPU runner's turn lock (--cpu-turn-lock, common/turn_lock.h): a runner given the file
// computes its steps only while it holds a turn, and an unopenable file names the flag.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "common/error.h"
#include "common/turn_lock.h"
#include "engine/cpu/cpu_runner.h"
#include "engine/model/presets.h"
#include "model_test_util.h"

namespace gpufrac::engine {
namespace {

using test_util::ScratchDir;

TEST(CpuTurnLock, WithoutAPathTheRunnerTakesNoTurns) {
  static const ModelWeights weights = generate_random_weights(*find_preset("tiny"), 7, 1);
  EXPECT_EQ(make_cpu_runner(weights, 1)->device_name(), "cpu (1 threads)");
}

TEST(CpuTurnLock, AnUnopenablePathNamesTheFlag) {
  static const ModelWeights weights = generate_random_weights(*find_preset("tiny"), 7, 1);
  try {
    make_cpu_runner(weights, 1, "/nonexistent-directory-of-gpufrac/turns.lock");
    FAIL() << "opened a file in a missing directory";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--cpu-turn-lock"), std::string::npos) << e.what();
  }
}

TEST(CpuTurnLock, TheCpuRunnerComputesOnlyDuringItsTurn) {
  ScratchDir dir("turn-lock-runner");
  std::string path = dir.file("turns.lock");
  static const ModelWeights weights = generate_random_weights(*find_preset("tiny"), 7, 1);
  std::unique_ptr<ModelRunner> runner = make_cpu_runner(weights, 1, path);
  EXPECT_NE(runner->device_name().find(path), std::string::npos) << runner->device_name();
  runner->allocate_kv_cache(4, 16);
  const std::vector<int32_t> tokens = {11, 22, 33}, table = {0};
  StepBatch batch;
  SequenceWork work;
  work.tokens = tokens;
  work.block_table = table;
  work.sample = true;
  batch.sequences.push_back(work);

  TurnLock other(path, "--cpu-turn-lock");  // another engine's open of the file
  std::optional<TurnLock::Turn> other_turn = other.try_take();
  ASSERT_TRUE(other_turn.has_value());  // another engine is computing
  std::atomic<bool> done = false;
  StepResult result;
  std::thread step([&] {
    runner->forward(batch, result);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(done) << "the step ran while another holder had the turn";
  other_turn.reset();
  step.join();
  EXPECT_TRUE(done);
  ASSERT_EQ(result.next_tokens.size(), 1u);
  EXPECT_TRUE(other.try_take().has_value()) << "the runner kept its turn after the step";
}

}  // namespace
}  // namespace gpufrac::engine
