// The CUDA backend's entry points for create_model_runner() (runner_factory.cpp). Free of CUDA
// headers, so the factory compiles with the host compiler alone.
#pragma once

#include <memory>

#include "engine/model/runner.h"
#include "engine/model/runner_options.h"

namespace gpufrac::engine {

// Whether a CUDA device is present and the driver answers.
bool cuda_device_usable();

// A preset's weights are generated on the GPU (bit-identical to the host generator); a
// checkpoint is loaded on the host and uploaded once. UsageError when no device is usable.
std::unique_ptr<ModelRunner> make_cuda_runner(const RunnerOptions& options);

}  // namespace gpufrac::engine
