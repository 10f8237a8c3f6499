// The boundary between the scheduler and the math: a ModelRunner executes one step (a batch of
// sequences, each contributing a prompt chunk or one decode token) and returns the next token of
// every sequence that asked to sample. Backends: cpu/ (fp32 reference) and cuda/.
//
// Contract:
// - The scheduler owns KV block ids (KvBlockAllocator); the runner owns the KV pool's memory,
//   allocated once by allocate_kv_cache(). Block b holds positions [b_i * block_size, ...) of the
//   sequence whose block_table lists it at index b_i.
// - forward() writes the K/V of every fed token into the sequence's blocks, attends causally over
//   positions [0, start_position + num_tokens), and samples only where `sample` is set.
// - Not thread-safe: one caller (the engine loop) at a time.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/model_config.h"

namespace gpufrac::engine {

struct SamplingParams {
  float temperature = 0;  // 0: greedy (argmax)
  int top_k = 0;          // 0: off
  float top_p = 1;        // 1: off
  uint64_t seed = 0;
  // Tokens generated so far by this request: with `seed`, it fixes the random draw of this step,
  // so a request's output does not depend on batching or on preemption.
  int64_t generated = 0;
  // Never sample these this step (EOS and stop ids while min_tokens is not reached).
  std::span<const int32_t> suppressed_ids;
};

struct SequenceWork {
  std::span<const int32_t> tokens;       // fed this step: a prompt chunk, or the last sampled token
  int32_t start_position = 0;            // position of tokens[0] (= tokens already in the KV cache)
  std::span<const int32_t> block_table;  // covers positions [0, start_position + tokens.size())
  bool sample = false;                   // this chunk ends the known tokens: sample the next one
  SamplingParams sampling;
};

struct StepBatch {
  std::vector<SequenceWork> sequences;
  bool return_logits = false;  // copy the logits of sampled rows into StepResult::logits (tests)
};

struct StepResult {
  std::vector<int32_t> next_tokens;  // one per sequence with sample set, in batch order
  std::vector<float> logits;         // [sampled rows x vocab], only when return_logits
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

  virtual void forward(const StepBatch& batch, StepResult& result) = 0;
};

}  // namespace gpufrac::engine
