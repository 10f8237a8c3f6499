// How a placed model instance is started: its command line, its environment (the limits of its
// sharing mode), its log file, CPU affinity and memory limit. Pure: builds a plan, starts nothing.
//
// Environment by mode (on top of the node's own, with CUDA_MPS_* and GPUFRAC_MEMCAP_* removed):
//   every GPU model   CUDA_VISIBLE_DEVICES=<GPU UUID> (the engine sees its GPU as device 0)
//   fractions (GPU)   CUDA_MPS_PIPE_DIRECTORY / CUDA_MPS_LOG_DIRECTORY of the GPU's daemon,
//                     CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=<sm %>,
//                     CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=<cap>M, and the memcap shim when built
//   timeslice (GPU)   the memcap shim: LD_PRELOAD + GPUFRAC_MEMCAP_BYTES/_TENANT/_STATE_DIR
//   elastic memory    (fractions or timeslice) the cap above is the ceiling (MPS's pinned limit
//                     too), plus GPUFRAC_MEMCAP_FLOOR_BYTES=<floor> and
//                     GPUFRAC_MEMCAP_POOL_BYTES=<the GPU's pool, placement.h>; the shim is
//                     required; the built-in engine gets --memory-budget elastic unless its
//                     engine_args give --memory-budget, and with elastic KV on a GPU
//                     --kv-map-lock RUN_DIR/kv-map-gpu<ID>.lock (unless its engine_args name
//                     one), so that the GPU's elastic engines map KV memory one at a time
//   dedicated (GPU)   nothing more
//   both of those     CUDA_MPS_PIPE_DIRECTORY=<run_dir>/mps/none (empty), so that the engine
//                     never joins a daemon on CUDA's default /tmp/nvidia-mps
//   CPU               CUDA_VISIBLE_DEVICES="" ; fractions: sched_setaffinity to its cores and
//                     OMP_NUM_THREADS; timeslice/fractions: RLIMIT_DATA = its memory cap;
//                     timeslice, builtin: --cpu-turn-lock RUN_DIR/cpu-turns.lock (unless its
//                     engine_args name one), so its steps take turns on all cores with the
//                     others' (common/turn_lock.h), as processes on a GPU without MPS
//   always            GPUFRAC_NODE_MODEL, GPUFRAC_NODE_PORT, GPUFRAC_NODE_MEMORY_BYTES (the
//                     cap or ceiling), GPUFRAC_NODE_SM_PERCENT (so any engine can read its
//                     limits; elastic memory adds GPUFRAC_NODE_MEMORY_FLOOR_BYTES), then the
//                     model's own env: entries. CPU: elastic memory's ceiling is the RLIMIT_DATA
//                     (no pool: host memory is not capped per tenant).
//   keys              with an engine key (the node's internal key): GPUFRAC_API_KEY (read by
//                     `gpufrac serve`) and VLLM_API_KEY (read by `vllm serve`) set to it, so the
//                     engine refuses requests that do not come through the router; inherited
//                     GPUFRAC_API_KEY and VLLM_API_KEY are removed either way, and so are the
//                     variables that hold the router's keys (models[].api_keys_env): a key is
//                     never on an engine's command line, and the clients' keys never reach it.
// Command line: builtin = `<gpufrac> serve --model M --device cuda|cpu --host 127.0.0.1
// --port P --served-model-name NAME [--KEY VALUE for engine_args]`; command: = `/bin/sh -c
// <command>` with {port}, {gpu}, {gpu_uuid}, {memory_bytes}, {gpu_memory_utilization} and {name}
// replaced ("exec <command>" when it is a plain command line, so that the engine itself is the
// process the node watches).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "memcap/memcap_config.h"
#include "node/node_spec.h"
#include "node/placement.h"

namespace gpufrac {

// The shim's file name; its environment variable names come from memcap/memcap_config.h (only
// those constants are used: the node never links the shim, it preloads it into engines).
inline constexpr const char* kMemcapLibraryName = "libgpufrac_memcap.so";
// Where an engine finds the key it requires: `gpufrac serve`'s and vLLM's variables.
inline constexpr const char* kEngineKeyVariable = "GPUFRAC_API_KEY";
inline constexpr const char* kVllmKeyVariable = "VLLM_API_KEY";

struct LaunchContext {
  std::string gpufrac_binary;  // runs builtin models
  std::string memcap_library;  // the shim's path; empty when it is not available
  std::string run_dir;
  // Per device (Placement::devices order): the MPS client environment of its daemon, for
  // fractions GPUs; empty otherwise.
  std::vector<std::vector<std::pair<std::string, std::string>>> mps_client_env;
  std::string engine_key;                       // the node's internal key; empty: none
  std::vector<std::string> withheld_variables;  // removed from every engine's environment
};

struct LaunchPlan {
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string log_path;
  std::vector<int> cpus;
  uint64_t data_limit_bytes = 0;
  int port = 0;
  std::string base_url;    // http://127.0.0.1:PORT
  std::string health_url;  // base_url + the model's health path
  // The node's internal key, which the engine requires (GPUFRAC_API_KEY, VLLM_API_KEY in env);
  // the router and the health checks send it. Empty: the engine takes requests without a key.
  std::string engine_key;
};

LaunchPlan plan_launch(const NodeSpec& spec, const Placement& placement,
                       const PlacedInstance& instance, int port, const LaunchContext& context);

// The file the built-in engines of a timeslice CPU node take turns on: RUN_DIR/cpu-turns.lock.
std::string cpu_turn_lock_path(const std::string& run_dir);
// The file the elastic built-in engines on GPU `gpu_id` map KV memory in turns on:
// RUN_DIR/kv-map-gpu<ID>.lock.
std::string kv_map_lock_path(const std::string& run_dir, const std::string& gpu_id);

// The memcap shim: the spec's memcap_library, else libgpufrac_memcap.so beside `gpufrac_binary`;
// empty when there is none. Throws UsageError naming memcap_library when the spec names a
// missing file.
std::string find_memcap_library(const NodeSpec& spec, const std::string& gpufrac_binary);

// Replaces {placeholders} in a command line; throws UsageError naming the field on an unknown one.
std::string expand_placeholders(const std::string& command,
                                const std::vector<std::pair<std::string, std::string>>& values,
                                const std::string& field);

// The limits of an engine on a GPU, as environment (the GPU rows of the table above). plan_launch
// and `gpufrac k8s exec` both build an engine's environment with set_gpu_limits.
struct GpuLimits {
  std::string gpu_uuid;  // CUDA_VISIBLE_DEVICES
  SharingMode mode = SharingMode::kFractions;
  int sm_percent = 100;           // fractions: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
  uint64_t memory_cap_bytes = 0;  // elastic memory: the ceiling
  bool elastic_memory = false;
  uint64_t memory_floor_bytes = 0;  // elastic memory: the floor
  uint64_t memory_pool_bytes = 0;   // elastic memory: the GPU's pool
  // fractions: the GPU daemon's client environment (pipe and log directories)
  std::vector<std::pair<std::string, std::string>> mps_client_env;
  std::string no_mps_pipe_dir;  // timeslice, dedicated: an empty CUDA_MPS_PIPE_DIRECTORY
  std::string memcap_library;   // the shim; empty when there is none (timeslice needs it)
  std::string memcap_tenant;    // letters, digits, '.', '_', '-'
  std::string memcap_state_dir;
};

// Removes inherited CUDA_MPS_*, GPUFRAC_MEMCAP_* and GPUFRAC_NODE_* variables, so that an engine
// never joins someone else's MPS server or cap by accident.
void clear_inherited_limits(std::vector<std::string>& env);
// Sets CUDA_VISIBLE_DEVICES and the limits of `limits.mode` in `env`; the shim goes first in
// LD_PRELOAD (fractions: when there is one; timeslice: always). Returns true when it preloads it.
bool set_gpu_limits(std::vector<std::string>& env, const GpuLimits& limits);

// A command: model's command line as argv: /bin/sh -c "exec <command>" when it is a plain command
// line (the engine itself is then the process that is watched and signalled), else as it is.
std::vector<std::string> shell_command_argv(const std::string& command);
// The built-in engine: <gpufrac> serve --model M --device D --host H --port P
// [--served-model-name NAME unless engine_args has one] [--KEY VALUE for each engine_args entry].
std::vector<std::string> builtin_engine_argv(const std::string& gpufrac_binary,
                                             const ModelSpec& model, const std::string& device,
                                             const std::string& host, int port);

// A name usable as a file name ("org/model#1" -> "org_model#1").
std::string file_safe(const std::string& name);


}  // namespace gpufrac
