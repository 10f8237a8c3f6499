// SynchronousRunner: the ModelRunner base of backends that compute a step on the calling thread
// (the CPU runner, the tests' FakeRunner). submit() computes the step at once and keeps its
// result; collect() hands the kept results over, oldest first. runs_ahead() is false, so the
// engine collects each step before it schedules the next (a derived class may claim otherwise,
// as FakeRunner does to test the engine's pipelined path); either way the outputs are the same:
// a placeholder token (SequenceWork::previous_sample_row) is replaced by the id the previous step
// sampled, which is already known here, before compute() sees the batch (and named in
// SamplingParams::resolved_placeholder, for the penalties).
//
// Derived classes implement compute(), which sees only real token ids. Not thread-safe.
#pragma once

#include <algorithm>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "engine/model/runner.h"

namespace gpufrac::engine {

class SynchronousRunner : public ModelRunner {
 public:
  void submit(const StepBatch& batch) final {
    if (outstanding_ == 2) throw std::logic_error("submit: two steps are outstanding");
    const StepBatch& resolved = resolve_placeholders(batch);
    StepResult& slot = results_[(first_ + outstanding_) % 2];
    try {
      compute(resolved, slot);
    } catch (...) {
      previous_tokens_.clear();  // nothing may refer to the rows of a step that did not run
      throw;
    }
    previous_tokens_ = slot.next_tokens;
    ++outstanding_;
  }

  bool runs_ahead() const override { return false; }

  void collect(StepResult& result) final {
    if (outstanding_ == 0) throw std::logic_error("collect: no step is outstanding");
    std::swap(result, results_[first_]);
    first_ = (first_ + 1) % 2;
    --outstanding_;
  }

 protected:
  // Runs one step whose tokens are all real ids (the contract of a step in runner.h).
  virtual void compute(const StepBatch& batch, StepResult& result) = 0;

 private:
  // `batch` itself when it has no placeholder; otherwise a copy whose placeholders are replaced
  // by the previous step's samples (valid until the next call).
  const StepBatch& resolve_placeholders(const StepBatch& batch) {
    size_t copied = 0;
    bool any = false;
    for (size_t i = 0; i < batch.sequences.size(); ++i) {
      const SequenceWork& work = batch.sequences[i];
      if (work.previous_sample_row < 0) continue;
      if (work.tokens.empty() ||
          size_t(work.previous_sample_row) >= previous_tokens_.size()) {
        throw RuntimeFailure("forward: sequence " + std::to_string(i) +
                             " takes its last token from sample row " +
                             std::to_string(work.previous_sample_row) +
                             " of the previous step, which sampled " +
                             std::to_string(previous_tokens_.size()) + " rows");
      }
      any = true;
      copied += work.tokens.size();
    }
    if (!any) return batch;
    resolved_tokens_.resize(copied);  // sized once: the spans below stay valid
    resolved_ = batch;
    size_t at = 0;
    for (SequenceWork& work : resolved_.sequences) {
      if (work.previous_sample_row < 0) continue;
      int32_t* tokens = resolved_tokens_.data() + at;
      std::copy(work.tokens.begin(), work.tokens.end(), tokens);
      const int32_t resolved = previous_tokens_[size_t(work.previous_sample_row)];
      tokens[work.tokens.size() - 1] = resolved;
      work.tokens = std::span<const int32_t>(tokens, work.tokens.size());
      work.previous_sample_row = -1;
      work.sampling.resolved_placeholder = resolved;  // counted by the penalties (runner.h)
      at += work.tokens.size();
    }
    return resolved_;
  }

  StepResult results_[2];  // ring of the outstanding steps' results
  int first_ = 0;
  int outstanding_ = 0;
  std::vector<int32_t> previous_tokens_;  // the samples of the last step submitted
  StepBatch resolved_;
  std::vector<int32_t> resolved_tokens_;
};

}  // namespace gpufrac::engine
