// RunnerOptions: what the user typed that decides which ModelRunner serves (`--model`,
// `--device`, `--seed`, `--threads`, `--cpu-turn-lock`, `--kv-map-lock`) and the engine limits
// that size a runner's step buffers (`--max-num-batched-tokens`, `--max-num-seqs`,
// `--max-model-len`). Plain data; read by
// create_model_runner() (engine/runner_factory.h) and by each backend's entry point.
#pragma once

#include <cstdint>
#include <string>

namespace gpufrac::engine {

struct RunnerOptions {
  std::string model;            // preset name (qwen3-4b, qwen3-0.6b, tiny) or checkpoint directory
  std::string device = "auto";  // "cpu", "cuda" or "auto"
  uint64_t seed = 0;            // preset weights are generated from this seed
  int threads = 0;              // CPU threads for the CPU runner and loading; 0 = every usable CPU
  // The files of TurnLocks (common/turn_lock.h): the CPU runner computes each step during a turn
  // of cpu_turn_lock; the CUDA runner maps elastic KV memory only during a turn of kv_map_lock.
  std::string cpu_turn_lock = {};
  std::string kv_map_lock = {};
  // The engine's limits (EngineOptions); 0 = the scheduler's defaults (max_num_batched_tokens,
  // max_num_seqs) or the model's max_position_embeddings (max_model_len).
  int max_num_batched_tokens = 0;
  int max_num_seqs = 0;
  int max_model_len = 0;
};

}  // namespace gpufrac::engine
