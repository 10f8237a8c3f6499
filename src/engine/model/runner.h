// The boundary between the scheduler and the math: a ModelRunner executes one step (a batch of
// sequences, each contributing a prompt chunk or one decode token) and returns the next token of
// every sequence that asked to sample (and, when asked, its logprobs). Backends: cpu/ (fp32
// reference, the CPU sampler in sampler.h) and cuda/ (the GPU sampler, the same rules).
//
// Contract:
// - The scheduler owns KV block ids (KvBlockAllocator); the runner owns the KV pool's memory,
//   allocated once by allocate_kv_cache(), or reserved by reserve_kv_cache() and backed in chunks
//   on demand (elastic KV, below). Block b holds positions [b_i * block_size, ...) of the
//   sequence whose block_table lists it at index b_i.
// - A step writes the K/V of every fed token into the sequence's blocks, attends causally over
//   positions [0, start_position + num_tokens), and samples only where `sample` is set.
// - Steps are pipelined: submit() starts a step and may return before it has run (the CUDA
//   runner only enqueues it), collect() waits for the oldest submitted step and hands over its
//   result. At most two steps are outstanding (submitted, not collected), so the caller can
//   schedule and submit step n+1 while the device runs step n. Steps run in submission order:
//   a step sees the K/V written by every step submitted before it.
// - A token sampled by the previous step need not be known to the caller: the sequence feeds a
//   placeholder in its place and names the previous step's sample row (previous_sample_row); the
//   runner takes the id from that step's output (on the device, for the CUDA runner).
// - Not thread-safe: one caller (the engine loop) at a time.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/model/logit_adjustment.h"
#include "engine/model/model_config.h"
#include "engine/model/token_logprob.h"

namespace gpufrac::engine {

// One id whose logit is adjusted before sampling (logit_adjustment.h): its logit_bias and, when a
// penalty is on, how often it was generated and whether the prompt holds it.
struct LogitAdjustment {
  int32_t id = 0;
  float bias = 0;
  int32_t output_count = 0;  // generated tokens equal to `id` (the placeholder's not included)
  bool in_prompt = false;    // set only when the repetition penalty is on
};

struct SamplingParams {
  float temperature = 0;  // 0: greedy (argmax)
  int top_k = 0;          // 0: off
  float top_p = 1;        // 1: off
  float min_p = 0;        // 0: off; else keep ids whose probability is >= min_p x the largest
  uint64_t seed = 0;
  // Tokens generated so far by this request: with `seed`, it fixes the random draw of this step,
  // so a request's output does not depend on batching or on preemption.
  int64_t generated = 0;
  // Never sample these this step (EOS and stop ids while min_tokens is not reached).
  std::span<const int32_t> suppressed_ids;
  // logit_bias and the penalties: applied to the logits first (also before greedy's argmax), to
  // the ids in `adjustments` (distinct ids) and, when a penalty is active and the sequence feeds a
  // placeholder (SequenceWork::previous_sample_row), to the placeholder's token as one more
  // generated occurrence: the runner resolves it (on the device for the CUDA runner).
  Penalties penalties;
  std::span<const LogitAdjustment> adjustments;
  // -1: no logprobs; 0..kMaxTopLogprobs: return the sampled token's logprob and this many of the
  // most likely ids' (StepResult::logprobs).
  int logprobs = -1;
  // Set by SynchronousRunner only, when it resolves a placeholder: that token (-1: none), which
  // `adjustments` does not count yet.
  int32_t resolved_placeholder = -1;

  // Whether the row needs more than temperature, top-k, top-p and suppression (the CUDA runner
  // samples such rows outside its decode graphs).
  bool uses_extras() const {
    return min_p > 0 || penalties.active() || !adjustments.empty() || logprobs >= 0;
  }
};

struct SequenceWork {
  std::span<const int32_t> tokens;       // fed this step: a prompt chunk, or the last sampled token
  int32_t start_position = 0;            // position of tokens[0] (= tokens already in the KV cache)
  std::span<const int32_t> block_table;  // covers positions [0, start_position + tokens.size())
  bool sample = false;                   // this chunk ends the known tokens: sample the next one
  SamplingParams sampling;
  // >= 0: the last of `tokens` is a placeholder for the token that the previous step (the one
  // submitted just before this one) sampled at this row of its result, which may not have been
  // collected yet. -1: every id in `tokens` is real.
  int32_t previous_sample_row = -1;
};

struct StepBatch {
  std::vector<SequenceWork> sequences;
  bool return_logits = false;  // copy the logits of sampled rows into StepResult::logits (tests)
};

struct StepResult {
  std::vector<int32_t> next_tokens;  // one per sequence with sample set, in batch order
  std::vector<float> logits;         // [sampled rows x vocab] raw logits, only when return_logits
  // Empty unless a row of the step asked for logprobs; then [sampled rows x kLogprobsStride]:
  // per row the sampled token's logprob, then its `logprobs` most likely ids' (most likely first,
  // ties to the lower id), then {-1, 0}. Rows that did not ask hold {-1, 0} throughout.
  std::vector<TokenLogprob> logprobs;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  virtual const ModelConfig& config() const = 0;
  virtual std::string device_name() const = 0;

  // Memory this process may still use on the runner's device, after its weights: the number the
  // KV pool is sized from under `--memory-budget auto`. Honours MPS and preload caps (it asks the
  // driver for free memory, never total).
  virtual uint64_t available_memory_bytes() const = 0;
  // Bytes one KV block of `block_size` tokens takes (all layers, K and V).
  virtual uint64_t kv_block_bytes(int block_size) const = 0;
  virtual void allocate_kv_cache(int num_blocks, int block_size) = 0;

  // Elastic KV: reserve_kv_cache() makes room for `max_blocks` ids but backs none with memory;
  // back_kv_blocks(n) backs blocks [0, n) (rounded up to whole chunks of kv_chunk_blocks()) as
  // far as the device gives memory and returns the blocks backed now (fewer than n when the device
  // or the process's cap refused: not an error); release_kv_blocks(n) gives back the memory of
  // the chunks past block n, which no outstanding step may use (the runner waits for its steps).
  // A runner that cannot back part of its pool keeps these defaults: the pool is allocated whole.
  virtual void reserve_kv_cache(int max_blocks, int block_size) {
    allocate_kv_cache(max_blocks, block_size);
    whole_pool_blocks_ = max_blocks;
  }
  virtual int back_kv_blocks(int /*blocks*/) { return whole_pool_blocks_; }
  virtual void release_kv_blocks(int /*keep_blocks*/) {}
  virtual int kv_chunk_blocks() const { return whole_pool_blocks_; }

  // Starts one step (see the contract above). Throws before starting anything when the batch is
  // invalid (RuntimeFailure naming the problem) or two steps are outstanding (std::logic_error).
  virtual void submit(const StepBatch& batch) = 0;
  // Waits for the oldest outstanding step and moves its result into `result`. Throws
  // std::logic_error when no step is outstanding, RuntimeFailure when the step failed on the
  // device (the step is no longer outstanding either way).
  virtual void collect(StepResult& result) = 0;
  // Whether submit() returns before the step has run (the device computes it meanwhile). Only
  // then does the engine submit step n+1 before collecting step n; a runner that computes inside
  // submit() would gain nothing from that and deliver every token one step late.
  virtual bool runs_ahead() const = 0;

  // One step, synchronously, with no step outstanding: submit() then collect() (tests and
  // benchmarks).
  void forward(const StepBatch& batch, StepResult& result) {
    submit(batch);
    collect(result);
  }

 private:
  int whole_pool_blocks_ = 0;  // what the default reserve_kv_cache allocated
};

}  // namespace gpufrac::engine
