// The one way the serving side gets a ModelRunner: from what the user typed (`--model`,
// `--device`, `--seed`, `--threads`, and the engine limits `--max-num-batched-tokens`,
// `--max-num-seqs`, `--max-model-len`, which size the CUDA runner's step buffers, decode-graph
// buckets and block tables; the CPU runner sizes per step and ignores them).
//
// device "cpu": the fp32 CPU runner. "cuda": the CUDA runner; UsageError when this build has no
// CUDA backend or no usable device. "auto": CUDA when built and a device is usable, else CPU.
// Loading may take seconds (an 8 GB checkpoint or preset); errors are UsageError (bad option, no
// such model) or RuntimeFailure (malformed checkpoint, out of memory).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/runner.h"

namespace gpufrac::engine {

struct RunnerOptions {
  std::string model;            // preset name (qwen3-4b, qwen3-0.6b, tiny) or checkpoint directory
  std::string device = "auto";  // "cpu", "cuda" or "auto"
  uint64_t seed = 0;            // preset weights are generated from this seed
  int threads = 0;              // CPU threads for the CPU runner and loading; 0 = every usable CPU
  // The engine's limits (EngineOptions); 0 = the scheduler's defaults (max_num_batched_tokens,
  // max_num_seqs) or the model's max_position_embeddings (max_model_len).
  int max_num_batched_tokens = 0;
  int max_num_seqs = 0;
  int max_model_len = 0;
};

std::unique_ptr<ModelRunner> create_model_runner(const RunnerOptions& options);

}  // namespace gpufrac::engine
