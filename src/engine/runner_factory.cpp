#include "engine/runner_factory.h"

#include "common/error.h"
#include "common/log.h"
#include "engine/cpu/cpu_runner.h"
#include "engine/model/model_loader.h"
#ifdef GPUFRAC_HAVE_CUDA
#include "engine/cuda/cuda_runner_factory.h"
#endif

namespace gpufrac::engine {

std::unique_ptr<ModelRunner> create_model_runner(const RunnerOptions& options) {
  if (options.device != "cpu" && options.device != "cuda" && options.device != "auto") {
    throw UsageError("--device must be cpu, cuda or auto, got '" + options.device + "'");
  }
  if (options.threads < 0) throw UsageError("--threads must be 0 (all CPUs) or positive");
#ifdef GPUFRAC_HAVE_CUDA
  if (options.device == "cuda" || (options.device == "auto" && cuda_device_usable())) {
    if (!options.cpu_turn_lock.empty()) {
      throw UsageError(
          "--cpu-turn-lock takes turns on the CPU's cores: use it with --device cpu "
          "(a GPU time-slices processes itself)");
    }
    return make_cuda_runner(options);
  }
#else
  if (options.device == "cuda") {
    throw UsageError("--device cuda: this gpufrac build has no CUDA runner (build it with the "
                     "CUDA toolkit installed, or use --device cpu)");
  }
#endif
  if (!options.kv_map_lock.empty()) {
    throw UsageError(
        "--kv-map-lock orders the mapping of elastic KV memory on a GPU: use it with --device "
        "cuda (the CPU's elastic KV is never short of memory to map)");
  }
  ModelWeights weights = load_model_weights(options.model, options.seed, options.threads);
  log_info("model ", weights.config.name, ": ", weights.config.num_layers, " layers, ",
           weights.total_bytes(), " bytes of weights, on the CPU");
  return make_cpu_runner(std::move(weights), options.threads, options.cpu_turn_lock);
}

}  // namespace gpufrac::engine
