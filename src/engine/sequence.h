// Sequence: one generated sequence inside the engine (a request's choice) — its tokens (prompt,
// then generated), how many of them have K/V in the cache, its KV block table, its sampling
// parameters with the logit adjustments its tokens feed (logit_adjustment_table.h) and the rules
// that end it (max_tokens, min_tokens, EOS unless ignore_eos, stop_token_ids).
//
// After a preemption by recompute, num_computed drops to 0 and the whole known token list
// (prompt + generated so far) is prefilled again; sampling stays reproducible because
// SamplingParams::generated tells the runner how many tokens came before.
//
// Pipelined steps (runner.h): a token sampled by a step that is still running is appended as a
// pending placeholder (kPendingToken), so the scheduler can plan the next step (which feeds it)
// before the id is known; resolve_pending_token() fills in the oldest placeholder when its step
// is collected. At most two are pending (the running step's and the one submitted after it).
//
// Not thread-safe: owned by the engine loop (the scheduler mutates the scheduling fields).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "engine/logit_adjustment_table.h"
#include "engine/model/runner.h"

namespace gpufrac::engine {

struct StopCriteria {
  int max_tokens = 16;   // generated tokens at most (>= 1)
  int min_tokens = 0;    // EOS and stop ids are suppressed until this many were generated
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;
};

enum class FinishReason { kNone, kLength, kStop, kCancelled, kError };
// OpenAI's finish_reason text: "length", "stop", "abort" (cancelled), "error".
std::string_view finish_reason_name(FinishReason reason);

enum class SequenceStatus { kWaiting, kRunning, kFinished };

class Sequence {
 public:
  // `eos_token_ids` come from the model's config; `sampling.generated` is the draw number of
  // the first token (0, or what an interrupted run of the request had generated); the per-step
  // draw number, `suppressed_ids` and `adjustments` are filled in by sampling_for_step().
  Sequence(uint64_t id, std::vector<int32_t> prompt, StopCriteria stop, SamplingParams sampling,
           std::span<const int32_t> eos_token_ids, LogitAdjustmentTable adjustments = {});

  uint64_t id() const { return id_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t num_tokens() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t prompt_len() const { return prompt_len_; }
  // Generated tokens, pending placeholders included (the count sampling and the scheduler use).
  int64_t num_generated() const { return num_tokens() - prompt_len_; }
  int64_t num_pending() const { return num_pending_; }
  // Generated tokens whose ids are known: what the client has received.
  int64_t num_output_tokens() const { return num_generated() - num_pending_; }
  int64_t num_uncomputed() const { return num_tokens() - num_computed; }
  const StopCriteria& stop() const { return stop_; }
  // max_tokens are generated (counting pending ones): nothing is left to compute for it.
  bool reached_max_tokens() const { return num_generated() >= stop_.max_tokens; }

  // The sampling parameters of this step: `generated` set (the first draw number plus the tokens
  // generated so far), the adjustments of the known tokens, and EOS/stop ids suppressed while
  // fewer than min_tokens were generated. The spans point into this sequence and stay valid until
  // its next token is appended or resolved.
  SamplingParams sampling_for_step() const;

  // Appends a sampled token and says whether it ends the sequence (kStop for EOS or a stop id,
  // kLength at max_tokens, else kNone). No placeholder may be pending.
  FinishReason append_token(int32_t token);

  // The id a placeholder stands for until resolve_pending_token() replaces it.
  static constexpr int32_t kPendingToken = -1;
  // Appends a placeholder for the token that row `row` of step `step` samples.
  void append_pending_token(int64_t step, int32_t row);
  // Replaces the oldest placeholder by `token` and says whether that token ends the sequence
  // (as append_token). Tokens sampled after an ending one stay pending and are never delivered.
  FinishReason resolve_pending_token(int32_t token);
  // The step and sample row of the newest placeholder (meaningful while num_pending() > 0).
  int64_t newest_pending_step() const { return newest_pending_step_; }
  int32_t newest_pending_row() const { return newest_pending_row_; }

  // Scheduling state (the scheduler's): tokens whose K/V is in the cache, the KV block table,
  // where the sequence is, and the step that last scheduled it.
  int64_t num_computed = 0;
  std::vector<int32_t> block_table;
  SequenceStatus status = SequenceStatus::kWaiting;
  uint64_t arrival_order = 0;   // FCFS order, set by Scheduler::add
  int64_t scheduled_step = -1;
  int num_preemptions = 0;
  int reserved_blocks = 0;  // KV blocks promised at admission (prompt + max_tokens); 0: none
  // Blocks of that need not promised yet: admitted against blocks that finishing sequences
  // will free (Scheduler, kReserve), promised as they come free.
  int credit_blocks = 0;

 private:
  static bool contains(const std::vector<int32_t>& ids, int32_t token);
  // The stop rules for the generated token at `index` of tokens_.
  FinishReason finish_reason_at(int64_t index) const;

  uint64_t id_;
  int64_t prompt_len_;
  std::vector<int32_t> tokens_;
  StopCriteria stop_;
  SamplingParams sampling_;
  LogitAdjustmentTable adjustments_;     // counts every token appended or resolved
  std::vector<int32_t> eos_ids_;         // empty when ignore_eos
  std::vector<int32_t> suppressed_ids_;  // EOS (unless ignore_eos) and stop ids, for min_tokens
  int64_t num_pending_ = 0;              // placeholders at the end of tokens_
  int64_t newest_pending_step_ = -1;
  int32_t newest_pending_row_ = -1;
};

}  // namespace gpufrac::engine
