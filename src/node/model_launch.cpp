#include "node/model_launch.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "common/error.h"
#include "node/process.h"

namespace gpufrac {
namespace {

std::string mebibytes_limit(uint64_t bytes) {
  // MPS takes sizes with a unit; whole MiB, rounded down, never above the cap.
  return std::to_string(bytes >> 20) + "M";
}

// The shim takes tenants of letters, digits, '.', '_' and '-', at most 64 characters.
std::string memcap_tenant(const std::string& node, const std::string& instance) {
  std::string tenant = node + "." + instance;
  for (char& c : tenant) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  }
  return tenant.substr(0, 64);
}

// The value engine_args give `name` (a flag of `gpufrac serve`, without its dashes), or nullptr.
const std::string* engine_arg(const ModelSpec& model, const std::string& name) {
  for (const auto& [key, value] : model.engine_args) {
    if (key == name) return &value;
  }
  return nullptr;
}

}  // namespace

std::string file_safe(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (c == '/' || c == ':' || c == ' ') c = '_';
  }
  return out;
}

std::string expand_placeholders(const std::string& command,
                                const std::vector<std::pair<std::string, std::string>>& values,
                                const std::string& field) {
  std::string out;
  size_t i = 0;
  while (i < command.size()) {
    size_t open = command.find('{', i);
    if (open == std::string::npos) {
      out += command.substr(i);
      break;
    }
    size_t close = command.find('}', open);
    out += command.substr(i, open - i);
    std::string key = close == std::string::npos ? "" : command.substr(open + 1, close - open - 1);
    bool known = false;
    for (const auto& [name, value] : values) {
      if (name == key) {
        out += value;
        known = true;
        break;
      }
    }
    if (!known) {
      bool looks_like_placeholder = !key.empty() && key.find_first_of(" \t\"'$") == std::string::npos;
      if (looks_like_placeholder) {
        std::string list;
        for (const auto& [name, value] : values) list += (list.empty() ? "{" : ", {") + name + "}";
        throw UsageError(field + ": unknown placeholder {" + key + "}; use " + list);
      }
      out += '{';  // shell braces and JSON in the command are left alone
      i = open + 1;
      continue;
    }
    i = close + 1;
  }
  return out;
}

std::string cpu_turn_lock_path(const std::string& run_dir) {
  return run_dir + "/cpu-turns.lock";
}

std::string kv_map_lock_path(const std::string& run_dir, const std::string& gpu_id) {
  return run_dir + "/kv-map-gpu" + gpu_id + ".lock";
}

std::string find_memcap_library(const NodeSpec& spec, const std::string& gpufrac_binary) {
  if (!spec.memcap_library.empty()) {
    if (!std::filesystem::exists(spec.memcap_library)) {
      throw UsageError(spec.source + ": memcap_library: " + spec.memcap_library +
                       " does not exist; build it (target gpufrac_memcap) or fix the path");
    }
    return std::filesystem::absolute(spec.memcap_library).string();
  }
  std::filesystem::path beside = std::filesystem::path(gpufrac_binary).parent_path() / kMemcapLibraryName;
  std::error_code ec;
  return std::filesystem::exists(beside, ec) ? beside.string() : "";
}

void clear_inherited_limits(std::vector<std::string>& env) {
  remove_env_prefix(env, "CUDA_MPS_");
  remove_env_prefix(env, "GPUFRAC_MEMCAP_");
  remove_env_prefix(env, "GPUFRAC_NODE_");
}

bool set_gpu_limits(std::vector<std::string>& env, const GpuLimits& limits) {
  set_env(env, "CUDA_VISIBLE_DEVICES", limits.gpu_uuid);
  bool capped_by_shim = false;
  if (limits.mode == SharingMode::kFractions) {
    for (const auto& [name, value] : limits.mps_client_env) set_env(env, name, value);
    set_env(env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", std::to_string(limits.sm_percent));
    set_env(env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
            "0=" + mebibytes_limit(limits.memory_cap_bytes));
    capped_by_shim = !limits.memcap_library.empty();
  } else {
    // Not an MPS client: point CUDA at an empty pipe directory, or it would join a daemon on the
    // default /tmp/nvidia-mps (someone else's) without a word.
    set_env(env, "CUDA_MPS_PIPE_DIRECTORY", limits.no_mps_pipe_dir);
    capped_by_shim = limits.mode == SharingMode::kTimeslice;
  }
  if (capped_by_shim) {
    std::string preload = limits.memcap_library;
    for (const std::string& entry : env) {
      if (entry.starts_with("LD_PRELOAD=") && entry.size() > 11) preload += ":" + entry.substr(11);
    }
    set_env(env, "LD_PRELOAD", preload);
    set_env(env, memcap::kEnvBytes, std::to_string(limits.memory_cap_bytes));
    set_env(env, memcap::kEnvTenant, limits.memcap_tenant);
    set_env(env, memcap::kEnvStateDir, limits.memcap_state_dir);
    if (limits.elastic_memory) {
      set_env(env, memcap::kEnvFloorBytes, std::to_string(limits.memory_floor_bytes));
      set_env(env, memcap::kEnvPoolBytes, std::to_string(limits.memory_pool_bytes));
    }
  }
  return capped_by_shim;
}

std::vector<std::string> shell_command_argv(const std::string& command) {
  bool plain = command.find_first_of(";&|()`\n") == std::string::npos &&
               command.find("$(") == std::string::npos;
  return {"/bin/sh", "-c", plain ? "exec " + command : command};
}

std::vector<std::string> builtin_engine_argv(const std::string& gpufrac_binary,
                                             const ModelSpec& model, const std::string& device,
                                             const std::string& host, int port) {
  std::vector<std::string> argv = {
      gpufrac_binary, "serve",  "--model", model.model, "--device",
      device,         "--host", host,      "--port",    std::to_string(port)};
  bool named = std::any_of(model.engine_args.begin(), model.engine_args.end(),
                           [](const auto& arg) { return arg.first == "served-model-name"; });
  if (!named) argv.insert(argv.end(), {"--served-model-name", model.name});
  for (const auto& [key, value] : model.engine_args) {
    argv.push_back("--" + key);
    if (!value.empty()) argv.push_back(value);
  }
  return argv;
}

LaunchPlan plan_launch(const NodeSpec& spec, const Placement& placement,
                       const PlacedInstance& instance, int port, const LaunchContext& context) {
  const ModelSpec& model = spec.models[instance.model_index];
  const PlacementDevice& device = placement.devices[instance.device_index];
  std::string field = "models[" + std::to_string(instance.model_index) + "]";
  LaunchPlan plan;
  plan.port = port;
  plan.base_url = "http://127.0.0.1:" + std::to_string(port);
  plan.health_url = plan.base_url + model.health_path;
  plan.log_path = context.run_dir + "/logs/" + file_safe(instance.instance_name) + ".log";

  if (model.builtin()) {
    plan.argv = builtin_engine_argv(context.gpufrac_binary, model, device.is_cpu() ? "cpu" : "cuda",
                                    "127.0.0.1", port);
    const std::string* budget = engine_arg(model, "memory-budget");
    if (instance.elastic_memory && !budget) {
      plan.argv.insert(plan.argv.end(), {"--memory-budget", "elastic"});
    }
    const bool elastic_kv = budget ? *budget == "elastic" : instance.elastic_memory;
    if (!device.is_cpu() && elastic_kv && !engine_arg(model, "kv-map-lock")) {
      plan.argv.insert(plan.argv.end(),
                       {"--kv-map-lock", kv_map_lock_path(context.run_dir, device.id)});
    }
    if (device.is_cpu() && instance.mode == SharingMode::kTimeslice &&
        !engine_arg(model, "cpu-turn-lock")) {
      plan.argv.insert(plan.argv.end(), {"--cpu-turn-lock", cpu_turn_lock_path(context.run_dir)});
    }
  } else {
    std::vector<std::pair<std::string, std::string>> values = {
        {"port", std::to_string(port)},
        {"gpu", device.id},
        {"gpu_uuid", device.uuid},
        {"memory_bytes", std::to_string(instance.memory_cap_bytes)},
        {"gpu_memory_utilization", gpu_memory_utilization(instance, device)},
        {"name", model.name},
    };
    plan.argv = shell_command_argv(expand_placeholders(model.command, values, field + ".command"));
  }

  std::vector<std::string>& env = plan.env;
  env = current_environment();
  clear_inherited_limits(env);
  for (const std::string& name : context.withheld_variables) set_env(env, name, std::nullopt);
  for (const char* name : {kEngineKeyVariable, kVllmKeyVariable}) {
    set_env(
        env, name,
        context.engine_key.empty() ? std::nullopt : std::optional<std::string>(context.engine_key));
  }
  plan.engine_key = context.engine_key;
  if (device.is_cpu()) {
    set_env(env, "CUDA_VISIBLE_DEVICES", "");
    if (instance.mode != SharingMode::kDedicated) plan.data_limit_bytes = instance.memory_cap_bytes;
    if (!instance.cpus.empty()) {
      plan.cpus = instance.cpus;
      set_env(env, "OMP_NUM_THREADS", std::to_string(instance.cpus.size()));
    }
  } else {
    if (instance.mode == SharingMode::kTimeslice && context.memcap_library.empty()) {
      throw UsageError(spec.source + ": memcap_library: timeslice mode caps memory with " +
                       kMemcapLibraryName + ", which is not built beside gpufrac; build target " +
                       "gpufrac_memcap or set memcap_library: PATH");
    }
    if (instance.elastic_memory && context.memcap_library.empty()) {
      throw UsageError(
          spec.source + ": memcap_library: " + field + ".fraction.memory {min, max} " +
          "shares the GPU through " + kMemcapLibraryName + ", which is not built " +
          "beside gpufrac; build target gpufrac_memcap, set memcap_library: PATH, or " +
          "give memory a share or bytes");
    }
    GpuLimits limits;
    limits.gpu_uuid = device.uuid;
    limits.mode = instance.mode;
    limits.sm_percent = instance.sm_percent;
    limits.memory_cap_bytes = instance.memory_cap_bytes;
    if (instance.elastic_memory) {
      limits.elastic_memory = true;
      limits.memory_floor_bytes = instance.memory_floor_bytes;
      limits.memory_pool_bytes =
          elastic_pool_bytes(placement, instance.device_index, spec.context_reserve_bytes);
    }
    if (instance.mode == SharingMode::kFractions)
      limits.mps_client_env = context.mps_client_env.at(instance.device_index);
    limits.no_mps_pipe_dir = context.run_dir + "/mps/none";
    limits.memcap_library = context.memcap_library;
    limits.memcap_tenant = memcap_tenant(spec.name, instance.instance_name);
    limits.memcap_state_dir = context.run_dir + "/memcap";
    set_gpu_limits(env, limits);
  }
  set_env(env, "GPUFRAC_NODE_MODEL", model.name);
  set_env(env, "GPUFRAC_NODE_PORT", std::to_string(port));
  set_env(env, "GPUFRAC_NODE_MEMORY_BYTES", std::to_string(instance.memory_cap_bytes));
  set_env(env, "GPUFRAC_NODE_SM_PERCENT", std::to_string(instance.sm_percent));
  if (instance.elastic_memory) {
    set_env(env, "GPUFRAC_NODE_MEMORY_FLOOR_BYTES", std::to_string(instance.memory_floor_bytes));
  }
  for (const auto& [name, value] : model.env) set_env(env, name, value);
  return plan;
}

}  // namespace gpufrac
