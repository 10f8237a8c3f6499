// LogitAdjustmentTable: one sequence's LogitAdjustments (runner.h) — the ids whose logits its
// logit_bias and penalties change — kept up to date as tokens are generated, so that each step
// hands the runner a span instead of recounting the sequence.
//
// Entries, one per distinct id: every logit_bias id; with the repetition penalty on, every prompt
// id (in_prompt); with any penalty on, every generated id (output_count). Without bias and
// penalties the table is empty and costs nothing per token. Entries keep their first-seen order.
//
// Not thread-safe: owned by a Sequence on the engine loop.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/model/runner.h"

namespace gpufrac::engine {

struct LogitBias {
  int32_t id = 0;
  float bias = 0;
};

class LogitAdjustmentTable {
 public:
  LogitAdjustmentTable() = default;
  LogitAdjustmentTable(std::span<const int32_t> prompt, std::span<const LogitBias> logit_bias,
                       const Penalties& penalties);

  // Counts a generated token (nothing when no penalty is on).
  void count_output(int32_t id);
  std::span<const LogitAdjustment> entries() const { return entries_; }

 private:
  LogitAdjustment& entry(int32_t id);

  bool count_outputs_ = false;
  std::vector<LogitAdjustment> entries_;
  std::unordered_map<int32_t, uint32_t> index_;  // id -> position in entries_
};

}  // namespace gpufrac::engine
