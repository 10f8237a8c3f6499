// The node spec: a YAML file saying which models a node serves, on which GPUs, how the GPUs are
// shared and what fraction each model gets. parse_node_spec() checks everything that can be
// checked without the machine (types, ranges, names, unknown fields) and throws UsageError with
// one line naming the field and the fix; placement (placement.h) checks the rest against the
// machine. A spec that parses is never half-applied: `gpufrac up` places every model first.
//
//   name: demo                  # the node's name: `gpufrac down --name demo` finds it
//   listen: 127.0.0.1:8000      # the router, one address for every model
//   device: auto                # auto (GPUs when NVML sees any, else CPU) | cuda | cpu
//   gpus: auto                  # auto | [0, 1] | [{gpu: 0, mode: timeslice}, {gpu: GPU-..}]
//   mode: fractions             # dedicated | timeslice | fractions: GPUs without their own mode
//   placement: binpack          # binpack (fill a GPU first) | spread (even out the GPUs)
//   models:
//     - name: qwen-a
//       model: qwen3-4b         # built-in engine (`gpufrac serve`): a preset or a model dir
//       engine_args: {max-num-seqs: 32, max-model-len: 4096}
//       fraction: {compute: 0.5, memory: 0.5}   # memory: a share (0.5, 50%) or bytes (19968M),
//                                               # or elastic: {min: 9G, max: 40G} (shares too)
//     - name: vllm-b
//       command: vllm serve Qwen/Qwen3-4B --port {port} --gpu-memory-utilization {gpu_memory_utilization}
//       fraction: {compute: 50%, memory: 19968M}
//       replicas: 1
//       gpu: 1                  # optional: run on this GPU (index or UUID)
//       api_keys_env: VLLM_B_KEYS   # the keys that may call it (or api_keys: [...], api_keys_file)
//       max_requests_in_flight: 32  # at the router; more get 429
//       requests_per_second: 10
//
// Keys: either every model names its keys (api_keys, api_keys_file, api_keys_env, any mix) or
// none does. The file and the variable are read when the node starts (model_keys.h), never here;
// a key in api_keys is checked here, and no error quotes a key.
// Every field is documented in docs/node.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace YAML {
class Node;
}

namespace gpufrac {

class YamlReader;

enum class SharingMode { kDedicated, kTimeslice, kFractions };
enum class PlacementPolicy { kBinpack, kSpread };
enum class DeviceKind { kAuto, kCuda, kCpu };

std::string_view sharing_mode_name(SharingMode mode);
std::string_view placement_policy_name(PlacementPolicy policy);

// Memory as a share of the device's memory (in (0, 1]) or as bytes: exactly one is set.
struct MemoryAmount {
  std::optional<double> share;
  std::optional<uint64_t> bytes;
};

struct FractionSpec {
  std::optional<double> compute;         // share of the SMs (or cores), in (0, 1]
  std::optional<double> memory_share;    // static memory: share of the GPU's memory, in (0, 1]
  std::optional<uint64_t> memory_bytes;  // or an absolute cap
  // Elastic memory (memory: {min, max}): a floor the model always has and a ceiling it may grow
  // to while the GPU's shared remainder has room. Both set, or neither; a min of 0 is allowed.
  std::optional<MemoryAmount> memory_min;
  std::optional<MemoryAmount> memory_max;
  bool elastic_memory() const { return memory_max.has_value(); }
  bool memory_given() const { return memory_share || memory_bytes || elastic_memory(); }
};

struct ModelSpec {
  std::string name;  // what clients put in "model"; unique in the node
  // Built-in engine: `gpufrac serve --model <model> ... --<key> <value>` for each engine_args entry
  // (an empty value is a bare flag). Any other engine: `command` (placeholders {port}, {gpu},
  // {gpu_uuid}, {memory_bytes}, {gpu_memory_utilization}, {name}), run through /bin/sh.
  std::string model;
  std::vector<std::pair<std::string, std::string>> engine_args;
  std::string command;
  bool builtin() const { return command.empty(); }
  std::vector<std::pair<std::string, std::string>> env;  // extra environment for the engine
  std::string health_path = "/health";
  double startup_timeout_s = 600;
  FractionSpec fraction;
  int replicas = 1;
  // The GPU (NVML index or UUID, one of the node's) every replica runs on; empty: placement picks.
  std::string gpu;
  double restart_wait_s = 30;  // how long the router holds a request while no replica is ready
  size_t queue_limit = 256;    // requests it holds at once for this model
  int failure_limit = 5;       // failures in a row before the model is marked failed; 0: never
  // Who may call it (docs/security.md): keys written in the spec, a file of keys, a variable.
  std::vector<std::string> api_keys;
  std::string api_keys_file;
  std::string api_keys_env;
  bool has_api_keys() const {
    return !api_keys.empty() || !api_keys_file.empty() || !api_keys_env.empty();
  }
  int max_requests_in_flight = 0;  // at the router; 0: no limit
  double requests_per_second = 0;  // at the router; 0: no limit
};

struct GpuSelection {
  std::string id;                   // NVML index ("0") or UUID ("GPU-...")
  std::optional<SharingMode> mode;  // else the spec's `mode`
};

struct NodeSpec {
  std::string source = "spec";  // file name, for messages
  std::string name = "default";
  std::string listen_host = "127.0.0.1";
  int listen_port = 8000;  // 0: any free port (tests)
  std::string run_dir;     // empty: ${GPUFRAC_RUN_DIR:-/tmp/gpufrac-UID}/NAME
  DeviceKind device = DeviceKind::kAuto;
  bool gpus_auto = true;
  std::vector<GpuSelection> gpus;
  SharingMode mode = SharingMode::kFractions;
  PlacementPolicy placement = PlacementPolicy::kBinpack;
  bool oversubscribe_compute = false;
  uint64_t context_reserve_bytes = uint64_t(512) << 20;  // per model context (and MPS server share)
  std::string memcap_library;  // empty: libgpufrac_memcap.so beside the gpufrac binary
  std::string mps_control;     // empty: $GPUFRAC_MPS_CONTROL or nvidia-cuda-mps-control on PATH
  double drain_timeout_s = 30;
  double stop_timeout_s = 10;
  std::vector<ModelSpec> models;
};

// Throws UsageError "<source>: <field>: <problem>; <fix>".
NodeSpec parse_node_spec(const std::string& yaml_text, const std::string& source);
NodeSpec load_node_spec(const std::string& path);  // reads the file, then parse_node_spec

// Reads `memory: {min, max}` at `field` into fraction.memory_min/max (elastic memory); throws
// UsageError naming the field (a bound missing, min above max). The experiment spec's
// node.memory reads the same way.
void parse_elastic_memory(const YamlReader& r, const YAML::Node& node, const std::string& field,
                          FractionSpec& fraction);

// The run directory the spec resolves to (see NodeSpec::run_dir).
std::string resolve_run_dir(const NodeSpec& spec);
std::string default_run_dir(const std::string& node_name);

}  // namespace gpufrac
