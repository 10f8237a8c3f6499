// LogitAdjustmentTable and how a Sequence keeps it: which ids get entries (bias, prompt ids under
// the repetition penalty, generated ids under any penalty), their counts as tokens are appended
// or resolved, and the span each step's SamplingParams carries.
#include "engine/logit_adjustment_table.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "engine/sequence.h"

namespace gpufrac::engine {
namespace {

std::map<int32_t, LogitAdjustment> by_id(std::span<const LogitAdjustment> entries) {
  std::map<int32_t, LogitAdjustment> out;
  for (const LogitAdjustment& e : entries) {
    EXPECT_TRUE(out.emplace(e.id, e).second) << "id " << e.id << " listed twice";
  }
  return out;
}

TEST(LogitAdjustmentTable, EmptyWithoutBiasOrPenalties) {
  std::vector<int32_t> prompt = {5, 6, 5};
  LogitAdjustmentTable table(prompt, {}, Penalties{});
  table.count_output(7);
  EXPECT_TRUE(table.entries().empty());
}

TEST(LogitAdjustmentTable, BiasPromptAndOutputEntries) {
  std::vector<int32_t> prompt = {5, 6, 5};
  std::vector<LogitBias> bias = {{9, -3.0f}, {6, 1.5f}, {9, 2.0f}};  // a repeated id: the last
  LogitAdjustmentTable biased(prompt, bias, Penalties{});
  auto entries = by_id(biased.entries());
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[9].bias, 2.0f);
  EXPECT_EQ(entries[6].bias, 1.5f);
  EXPECT_FALSE(entries[6].in_prompt) << "prompt ids matter only to the repetition penalty";

  LogitAdjustmentTable repetition(prompt, bias, Penalties{0, 0, 1.2f});
  repetition.count_output(5);
  repetition.count_output(11);
  repetition.count_output(11);
  entries = by_id(repetition.entries());
  ASSERT_EQ(entries.size(), 4u);  // 9, 6, 5, 11
  EXPECT_TRUE(entries[5].in_prompt);
  EXPECT_EQ(entries[5].output_count, 1);
  EXPECT_TRUE(entries[6].in_prompt);
  EXPECT_EQ(entries[6].bias, 1.5f);
  EXPECT_FALSE(entries[11].in_prompt);
  EXPECT_EQ(entries[11].output_count, 2);
  EXPECT_FALSE(entries[9].in_prompt);

  LogitAdjustmentTable presence(prompt, {}, Penalties{0.5f, 0, 1});
  presence.count_output(5);
  entries = by_id(presence.entries());
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_FALSE(entries[5].in_prompt);
  EXPECT_EQ(entries[5].output_count, 1);
}

TEST(LogitAdjustmentTable, ASequenceCountsAppendedAndResolvedTokens) {
  SamplingParams sampling;
  sampling.penalties.frequency = 0.5f;
  std::vector<int32_t> prompt = {1, 2};
  StopCriteria stop;
  stop.max_tokens = 8;
  Sequence sequence(1, prompt, stop, sampling, {},
                    LogitAdjustmentTable(prompt, {}, sampling.penalties));
  EXPECT_TRUE(sequence.sampling_for_step().adjustments.empty());
  sequence.append_token(4);
  sequence.append_pending_token(0, 0);
  // The pending token is not counted: the runner counts the placeholder it feeds.
  auto entries = by_id(sequence.sampling_for_step().adjustments);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[4].output_count, 1);
  sequence.resolve_pending_token(4);
  entries = by_id(sequence.sampling_for_step().adjustments);
  EXPECT_EQ(entries[4].output_count, 2);
  EXPECT_EQ(sequence.sampling_for_step().penalties.frequency, 0.5f);
}

}  // namespace
}  // namespace gpufrac::engine
