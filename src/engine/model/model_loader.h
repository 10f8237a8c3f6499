// Turns what a user names with `--model` into ModelWeights: a preset name (presets.h, weights
// generated from the seed) or a Hugging Face checkpoint directory (config.json +
// model.safetensors[.index.json], see safetensors.h).
//
// Checkpoint loading keeps the mmapped tensors as views where they are used as stored (embed,
// norms, o_proj, down_proj, lm_head) and copies q|k|v and gate|up into owned fused buffers. It is
// strict: a missing tensor, a shape unlike config.json, or a tensor the engine would silently
// ignore (e.g. an o_proj bias) fails with one line naming the tensor and its file.
#pragma once

#include <cstdint>
#include <string>

#include "engine/model/weights.h"

namespace gpufrac::engine {

// UsageError when the directory lacks config.json / safetensors or config.json is wrong;
// RuntimeFailure when a safetensors file or a tensor is malformed.
ModelWeights load_checkpoint_weights(const std::string& checkpoint_dir);

// `model` is a preset name or a checkpoint directory; `seed` and `threads` (0 = all usable CPUs)
// only matter for presets. UsageError if it is neither.
ModelWeights load_model_weights(const std::string& model, uint64_t seed, int threads);

}  // namespace gpufrac::engine
