#include "engine/sequence.h"

#include <algorithm>
#include <stdexcept>

namespace gpufrac::engine {

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength: return "length";
    case FinishReason::kStop: return "stop";
    case FinishReason::kCancelled: return "abort";
    case FinishReason::kError: return "error";
    case FinishReason::kNone: break;
  }
  return "";
}

Sequence::Sequence(uint64_t id, std::vector<int32_t> prompt, StopCriteria stop,
                   SamplingParams sampling, std::span<const int32_t> eos_token_ids,
                   LogitAdjustmentTable adjustments)
    : id_(id),
      prompt_len_(static_cast<int64_t>(prompt.size())),
      tokens_(std::move(prompt)),
      stop_(std::move(stop)),
      sampling_(sampling),
      adjustments_(std::move(adjustments)) {
  // Room for every token this sequence may reach: appending never reallocates mid-flight.
  tokens_.reserve(tokens_.size() + std::max(stop_.max_tokens, 0));
  if (!stop_.ignore_eos) eos_ids_.assign(eos_token_ids.begin(), eos_token_ids.end());
  suppressed_ids_ = eos_ids_;
  for (int32_t id : stop_.stop_token_ids) {
    if (!contains(suppressed_ids_, id)) suppressed_ids_.push_back(id);
  }
  sampling_.suppressed_ids = {};
  sampling_.adjustments = {};
}

bool Sequence::contains(const std::vector<int32_t>& ids, int32_t token) {
  return std::find(ids.begin(), ids.end(), token) != ids.end();
}

SamplingParams Sequence::sampling_for_step() const {
  SamplingParams params = sampling_;
  params.generated = sampling_.generated + num_generated();
  params.adjustments = adjustments_.entries();
  if (num_generated() < stop_.min_tokens) params.suppressed_ids = suppressed_ids_;
  return params;
}

FinishReason Sequence::append_token(int32_t token) {
  if (num_pending_ > 0) throw std::logic_error("append_token while a placeholder is pending");
  tokens_.push_back(token);
  adjustments_.count_output(token);
  return finish_reason_at(num_tokens() - 1);
}

void Sequence::append_pending_token(int64_t step, int32_t row) {
  if (num_pending_ >= 2) throw std::logic_error("a third pending token");
  tokens_.push_back(kPendingToken);
  ++num_pending_;
  newest_pending_step_ = step;
  newest_pending_row_ = row;
}

FinishReason Sequence::resolve_pending_token(int32_t token) {
  if (num_pending_ == 0) throw std::logic_error("resolve_pending_token with nothing pending");
  int64_t index = num_tokens() - num_pending_;
  tokens_[size_t(index)] = token;
  adjustments_.count_output(token);
  --num_pending_;
  return finish_reason_at(index);
}

FinishReason Sequence::finish_reason_at(int64_t index) const {
  int32_t token = tokens_[size_t(index)];
  int64_t generated = index + 1 - prompt_len_;
  if (generated >= stop_.min_tokens &&
      (contains(eos_ids_, token) || contains(stop_.stop_token_ids, token))) {
    return FinishReason::kStop;
  }
  if (generated >= stop_.max_tokens) return FinishReason::kLength;
  return FinishReason::kNone;
}

}  // namespace gpufrac::engine
