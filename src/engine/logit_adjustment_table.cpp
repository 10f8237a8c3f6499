#include "engine/logit_adjustment_table.h"

namespace gpufrac::engine {

LogitAdjustmentTable::LogitAdjustmentTable(std::span<const int32_t> prompt,
                                           std::span<const LogitBias> logit_bias,
                                           const Penalties& penalties)
    : count_outputs_(penalties.active()) {
  for (const LogitBias& b : logit_bias) entry(b.id).bias = b.bias;
  if (penalties.repetition != 1) {
    for (int32_t id : prompt) entry(id).in_prompt = true;
  }
}

LogitAdjustment& LogitAdjustmentTable::entry(int32_t id) {
  auto [it, added] = index_.try_emplace(id, uint32_t(entries_.size()));
  if (added) entries_.push_back({id, 0, 0, false});
  return entries_[it->second];
}

void LogitAdjustmentTable::count_output(int32_t id) {
  if (count_outputs_) ++entry(id).output_count;
}

}  // namespace gpufrac::engine
