#include "engine/runner_factory.h"

#include "common/error.h"
#include "common/log.h"
#include "engine/cpu/cpu_runner.h"
#include "engine/model_loader.h"

namespace gpufrac::engine {

std::unique_ptr<ModelRunner> create_model_runner(const RunnerOptions& options) {
  if (options.device != "cpu" && options.device != "cuda" && options.device != "auto") {
    throw UsageError("--device must be cpu, cuda or auto, got '" + options.device + "'");
  }
  if (options.device == "cuda") {
    throw UsageError("--device cuda: this gpufrac build has no CUDA runner (build it with the "
                     "CUDA toolkit installed, or use --device cpu)");
  }
  if (options.threads < 0) throw UsageError("--threads must be 0 (all CPUs) or positive");
  ModelWeights weights = load_model_weights(options.model, options.seed, options.threads);
  log_info("model ", weights.config.name, ": ", weights.config.num_layers, " layers, ",
           weights.total_bytes(), " bytes of weights, on the CPU");
  return make_cpu_runner(std::move(weights), options.threads);
}

}  // namespace gpufrac::engine
