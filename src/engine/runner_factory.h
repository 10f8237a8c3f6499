// The one way the serving side gets a ModelRunner: from RunnerOptions (model/runner_options.h).
// The engine limits there size the CUDA runner's step buffers, decode-graph buckets and block
// tables; the CPU runner sizes per step and ignores them.
//
// device "cpu": the fp32 CPU runner. "cuda": the CUDA runner; UsageError when this build has no
// CUDA backend or no usable device. "auto": CUDA when built and a device is usable, else CPU.
// A cpu_turn_lock with the CUDA runner, or a kv_map_lock with the CPU runner, is a UsageError.
// Loading may take seconds (an 8 GB checkpoint or preset); errors are UsageError (bad option, no
// such model) or RuntimeFailure (malformed checkpoint, out of memory).
#pragma once

#include <memory>

#include "engine/model/runner.h"
#include "engine/model/runner_options.h"

namespace gpufrac::engine {

std::unique_ptr<ModelRunner> create_model_runner(const RunnerOptions& options);

}  // namespace gpufrac::engine
