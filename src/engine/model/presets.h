// Built-in models with seeded random weights: the exact shapes of real checkpoints (so memory and
// compute cost are real) with no files to download.
//
//   qwen3-4b    Qwen3-4B shapes (36 layers, hidden 2560, 32/8 heads x 128, 9728, tied): 8.05 GB
//   qwen3-0.6b  Qwen3-0.6B shapes (28 layers, hidden 1024, 16/8 heads x 128, 3072, tied): 1.19 GB
//   tiny        2 layers, hidden 64, 4/2 heads x 32 (q width 128 != hidden, like the real
//               models), intermediate 256, but Qwen3's vocabulary (151936), q/k norm, tied
//               embeddings, rope_theta 1e6, eos 151645/151643: ~20 MB
//
// Weights are bf16, a pure function of (config, seed): the same on every machine and for every
// thread count. Matrices and biases ~ N(0, 0.02^2) (an Irwin-Hall approximation), norm weights
// ~ 1 + N(0, 0.1^2), so activations stay in a sane range and a wrong norm still shows in tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/weights.h"

namespace gpufrac::engine {

std::vector<std::string> preset_names();
// The preset's config, or nullopt if `name` is not a preset.
std::optional<ModelConfig> find_preset(const std::string& name);

// Random bf16 weights for any config (presets, or test models of other families). `threads`:
// 0 = every usable CPU. One 64-bit hash per element, so the cost is linear in the weight bytes
// and divides over the threads (cpu_forward_bench measures it).
ModelWeights generate_random_weights(const ModelConfig& config, uint64_t seed, int threads);

}  // namespace gpufrac::engine
