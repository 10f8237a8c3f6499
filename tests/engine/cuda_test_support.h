// Helpers for the GPU tests of the CUDA runner: sequences with their own KV blocks driven step by
// step through any ModelRunner, and the logit comparison the tests share.
//
// A TestSequence owns the token ids fed so far plus the ones still to feed, and a contiguous run
// of KV block ids handed out by a BlockCounter. Single-threaded, like the runners.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/model/runner.h"

namespace gpufrac::engine::testing {

class BlockCounter {
 public:
  explicit BlockCounter(int block_size) : block_size_(block_size) {}
  // Block ids for a sequence that will reach `max_positions` positions.
  std::vector<int32_t> take(int max_positions) {
    int count = (max_positions + block_size_ - 1) / block_size_;
    std::vector<int32_t> blocks(static_cast<size_t>(count));
    for (int32_t& b : blocks) b = next_++;
    return blocks;
  }
  int used() const { return next_; }
  int block_size() const { return block_size_; }

 private:
  int block_size_;
  int32_t next_ = 0;
};

struct TestSequence {
  std::vector<int32_t> tokens;  // every known token (prompt, then sampled ones)
  int computed = 0;             // tokens whose K/V are in the cache
  std::vector<int32_t> blocks;
  SamplingParams sampling;      // greedy by default
};

// One step: each listed sequence feeds min(chunk, unfed) tokens and samples when that reaches
// the end of its known tokens. Spans point into the sequences, which must outlive the batch.
inline StepBatch make_step(std::vector<TestSequence*> sequences, int chunk, bool return_logits) {
  StepBatch batch;
  batch.return_logits = return_logits;
  for (TestSequence* s : sequences) {
    int unfed = int(s->tokens.size()) - s->computed;
    int n = std::min(chunk, unfed);
    SequenceWork work;
    work.tokens = std::span<const int32_t>(s->tokens.data() + s->computed, size_t(n));
    work.start_position = s->computed;
    work.block_table = std::span<const int32_t>(s->blocks);
    work.sample = n == unfed;
    work.sampling = s->sampling;
    work.sampling.generated = int64_t(s->tokens.size());
    batch.sequences.push_back(work);
  }
  return batch;
}

// After a step built by make_step: advances `computed`.
inline void complete_step(std::vector<TestSequence*> sequences, const StepBatch& batch) {
  for (size_t i = 0; i < sequences.size(); ++i) {
    sequences[i]->computed += int(batch.sequences[i].tokens.size());
  }
}

struct RowComparison {
  double max_abs_diff = 0;
  double reference_rms = 0;
  int32_t reference_top1 = -1;
  int32_t actual_top1 = -1;
  double reference_margin = 0;  // reference top-1 logit minus its logit of actual_top1
};

inline int32_t argmax(std::span<const float> row) {
  return int32_t(std::max_element(row.begin(), row.end()) - row.begin());
}

inline RowComparison compare_rows(std::span<const float> reference, std::span<const float> actual) {
  RowComparison c;
  double squares = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    double d = std::fabs(double(reference[i]) - double(actual[i]));
    if (!(d <= c.max_abs_diff)) c.max_abs_diff = std::isnan(d) ? INFINITY : d;
    squares += double(reference[i]) * double(reference[i]);
  }
  c.reference_rms = std::sqrt(squares / double(reference.size()));
  c.reference_top1 = argmax(reference);
  c.actual_top1 = argmax(actual);
  c.reference_margin = double(reference[size_t(c.reference_top1)]) -
                       double(reference[size_t(c.actual_top1)]);
  return c;
}

}  // namespace gpufrac::engine::testing
