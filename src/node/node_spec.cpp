#include "node/node_spec.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "common/api_key.h"
#include "common/error.h"
#include "common/strings.h"
#include "common/yaml_reader.h"

namespace gpufrac {
namespace {

SharingMode parse_mode(const YamlReader& r, const YAML::Node& node, const std::string& field) {
  std::string v = r.scalar(node, field);
  if (v == "dedicated") return SharingMode::kDedicated;
  if (v == "timeslice") return SharingMode::kTimeslice;
  if (v == "fractions") return SharingMode::kFractions;
  r.fail(node, field, "'" + v + "' is not a sharing mode; use dedicated, timeslice or fractions");
}

bool valid_model_name(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
          c == ':' || c == '/')) {
      return false;
    }
  }
  return true;
}

void parse_listen(const YamlReader& r, const YAML::Node& node, NodeSpec& spec) {
  std::string v(trim(r.scalar(node, "listen")));
  size_t colon = v.rfind(':');
  std::string host = colon == std::string::npos ? "" : v.substr(0, colon);
  std::string port = colon == std::string::npos ? v : v.substr(colon + 1);
  int64_t number = -1;
  try {
    number = parse_int(port, "listen");
  } catch (const UsageError&) {
  }
  if (number < 0 || number > 65535) {
    r.fail(node, "listen", "'" + v + "' is not HOST:PORT; use e.g. 127.0.0.1:8000 or 0.0.0.0:8000");
  }
  if (!host.empty()) spec.listen_host = host;
  spec.listen_port = int(number);
}

void parse_gpus(const YamlReader& r, const YAML::Node& node, NodeSpec& spec) {
  if (node.IsScalar() && node.Scalar() == "auto") return;
  if (!node.IsSequence() || node.size() == 0) {
    r.fail(node, "gpus", "use auto, or a list of GPU indexes/UUIDs like [0, 1]");
  }
  spec.gpus_auto = false;
  std::set<std::string> seen;
  for (size_t i = 0; i < node.size(); ++i) {
    std::string field = "gpus[" + std::to_string(i) + "]";
    GpuSelection gpu;
    const YAML::Node& item = node[i];
    if (item.IsMap()) {
      r.check_keys(item, field, {"gpu", "mode"});
      if (!item["gpu"]) r.fail(item, field + ".gpu", "missing; give the GPU's index or UUID");
      gpu.id = r.text(item["gpu"], field + ".gpu");
      if (item["mode"]) gpu.mode = parse_mode(r, item["mode"], field + ".mode");
    } else {
      gpu.id = r.text(item, field);
    }
    if (!seen.insert(gpu.id).second) r.fail(item, field, "GPU " + gpu.id + " is listed twice; list it once");
    spec.gpus.push_back(gpu);
  }
}

// "50%" and numbers up to 1 are shares; anything else is a byte size ("20G", 21474836480). A
// zero is refused unless `zero_allowed` (then it is 0 bytes).
MemoryAmount parse_memory_amount(const YamlReader& r, const YAML::Node& node,
                                 const std::string& field, bool zero_allowed) {
  MemoryAmount amount;
  std::string v(trim(r.scalar(node, field)));
  bool plain_number = !v.empty() && v.find_first_not_of("0123456789.") == std::string::npos;
  double number =
      plain_number
          ? r.parsed(node, field, [&](const std::string& s) { return parse_double(s, field); })
          : -1;
  if (zero_allowed && plain_number && number == 0) {
    amount.bytes = 0;
  } else if ((!v.empty() && v.back() == '%') || (plain_number && number <= 1)) {
    amount.share = r.share(node, field);
  } else {
    amount.bytes =
        r.parsed(node, field, [&](const std::string& s) { return parse_bytes(s, field); });
    if (*amount.bytes == 0 && !zero_allowed) {
      r.fail(node, field, "is zero; give a share like 0.5 or bytes like 20G");
    }
  }
  return amount;
}

std::string amount_text(const MemoryAmount& amount) {
  if (amount.bytes) return format_bytes(*amount.bytes);
  char text[32];
  std::snprintf(text, sizeof text, "%g", *amount.share);
  return text;
}

void parse_fraction(const YamlReader& r, const YAML::Node& node, const std::string& field,
                    FractionSpec& fraction) {
  r.check_keys(node, field, {"compute", "memory"});
  if (node["compute"]) fraction.compute = r.share(node["compute"], field + ".compute");
  if (const YAML::Node& memory = node["memory"]) {
    std::string field_memory = field + ".memory";
    if (memory.IsMap()) {
      parse_elastic_memory(r, memory, field_memory, fraction);
      return;
    }
    MemoryAmount amount = parse_memory_amount(r, memory, field_memory, /*zero_allowed=*/false);
    fraction.memory_share = amount.share;
    fraction.memory_bytes = amount.bytes;
  }
}

// An integer in [0, max]; `example` is the fix the error names.
int64_t count_in(const YamlReader& r, const YAML::Node& value, const std::string& field,
                 int64_t max, const std::string& example) {
  int64_t n = r.parsed(value, field, [&](const std::string& v) { return parse_int(v, field); });
  if (n < 0 || n > max) r.fail(value, field, "must be 0.." + std::to_string(max) + ", " + example);
  return n;
}

// What the router and the supervisor do while a model's engine is down (docs/node.md).
void parse_resilience(const YamlReader& r, const YAML::Node& node, const std::string& field,
                      ModelSpec& model) {
  if (const YAML::Node& wait = node["restart_wait"]) {
    std::string name = field + ".restart_wait";
    model.restart_wait_s =
        r.parsed(wait, name, [&](const std::string& v) { return parse_seconds(v, name); });
    if (model.restart_wait_s < 0 || model.restart_wait_s > 3600) {
      r.fail(wait, name,
             "must be 0..3600 s, like 30s (0: answer 503 at once while no replica is ready)");
    }
  }
  if (const YAML::Node& limit = node["queue_limit"]) {
    model.queue_limit =
        size_t(count_in(r, limit, field + ".queue_limit", int64_t(1) << 20,
                        "like 256 (requests held at once while no replica is ready)"));
  }
  if (const YAML::Node& limit = node["failure_limit"]) {
    model.failure_limit = int(count_in(r, limit, field + ".failure_limit", 1000,
                                       "like 5 (failures in a row before the model is marked "
                                       "failed; 0: never)"));
  }
}

bool valid_variable_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// Who may call the model and how often (docs/security.md). No message quotes a key.
void parse_access(const YamlReader& r, const YAML::Node& node, const std::string& field,
                  ModelSpec& model) {
  if (const YAML::Node& keys = node["api_keys"]) {
    std::string name = field + ".api_keys";
    if (!keys.IsSequence() || keys.size() == 0) {
      r.fail(keys, name,
             "must be a list of keys like [key-a, key-b]; or use api_keys_file or api_keys_env so "
             "that no key sits in the spec");
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      std::string item = YamlReader::index(name, i);
      if (!keys[i].IsScalar()) r.fail(keys[i], item, "must be a key (a string)");
      if (std::string problem = api_key_problem(keys[i].Scalar()); !problem.empty()) {
        r.fail(keys[i], item, problem);
      }
      model.api_keys.push_back(keys[i].Scalar());
    }
  }
  if (node["api_keys_file"])
    model.api_keys_file = r.text(node["api_keys_file"], field + ".api_keys_file");
  if (const YAML::Node& variable = node["api_keys_env"]) {
    model.api_keys_env = r.text(variable, field + ".api_keys_env");
    if (!valid_variable_name(model.api_keys_env)) {
      r.fail(
          variable, field + ".api_keys_env",
          "'" + model.api_keys_env +
              "' is not an environment variable name; use letters, digits and _ like QWEN_A_KEYS");
    }
  }
  if (const YAML::Node& limit = node["max_requests_in_flight"]) {
    std::string name = field + ".max_requests_in_flight";
    int64_t n = r.parsed(limit, name, [&](const std::string& v) { return parse_int(v, name); });
    if (n < 1 || n > (1 << 20)) {
      r.fail(limit, name, "must be 1..1048576, like 32 (requests at once; more get 429)");
    }
    model.max_requests_in_flight = int(n);
  }
  if (const YAML::Node& rate = node["requests_per_second"]) {
    std::string name = field + ".requests_per_second";
    double v =
        r.parsed(rate, name, [&](const std::string& text) { return parse_double(text, name); });
    if (!(v >= 1e-3 && v <= 1e6)) {
      r.fail(rate, name,
             "must be 0.001..1000000 requests per second, like 10 or 0.5 (more get 429)");
    }
    model.requests_per_second = v;
  }
}

ModelSpec parse_model(const YamlReader& r, const YAML::Node& node, const std::string& field) {
  r.check_keys(
      node, field,
      {"name", "engine", "model", "engine_args", "command", "env", "health", "startup_timeout",
       "fraction", "replicas", "gpu", "restart_wait", "queue_limit", "failure_limit", "api_keys",
       "api_keys_file", "api_keys_env", "max_requests_in_flight", "requests_per_second"});
  ModelSpec model;
  if (!node["name"]) r.fail(node, field + ".name", "missing; every model needs a name");
  model.name = r.text(node["name"], field + ".name");
  if (!valid_model_name(model.name)) {
    r.fail(node["name"], field + ".name",
           "'" + model.name + "' has characters other than letters, digits and . _ - : /; rename it");
  }
  std::string engine = node["engine"] ? r.text(node["engine"], field + ".engine")
                                      : (node["command"] ? "command" : "builtin");
  if (engine != "builtin" && engine != "command") {
    r.fail(node["engine"], field + ".engine",
           "'" + engine + "' is not an engine; use builtin (with model:) or command (with command:)");
  }
  if (engine == "command") {
    if (!node["command"]) r.fail(node, field + ".command", "missing; give the engine's command line");
    model.command = r.text(node["command"], field + ".command");
    if (model.command.find("{port}") == std::string::npos) {
      r.fail(node["command"], field + ".command",
             "does not use {port}; the engine must listen on the port the node gives it");
    }
    for (const char* builtin_only : {"model", "engine_args"}) {
      if (node[builtin_only]) {
        r.fail(node[builtin_only], field + "." + builtin_only,
               "applies to the builtin engine only; put it in command: instead");
      }
    }
  } else {
    if (node["command"]) r.fail(node["command"], field + ".command", "needs engine: command (or drop engine:)");
    if (!node["model"]) {
      r.fail(node, field + ".model", "missing; give a preset (tiny, qwen3-0.6b, qwen3-4b) or a model directory");
    }
    model.model = r.text(node["model"], field + ".model");
    if (const YAML::Node& args = node["engine_args"]) {
      if (!args.IsMap()) r.fail(args, field + ".engine_args", "must be a mapping like {max-num-seqs: 32}");
      for (const auto& entry : args) {
        std::string key = entry.first.Scalar();
        std::string arg_field = field + ".engine_args." + key;
        std::string value = r.scalar(entry.second, arg_field);
        if (key.starts_with("--")) key = key.substr(2);
        for (const char* owned : {"port", "host", "device"}) {
          if (key == owned) {
            r.fail(entry.first, arg_field, "is set by the node; remove it from engine_args");
          }
        }
        if (value == "true") value.clear();  // a bare flag
        if (value == "false") continue;
        model.engine_args.emplace_back(key, value);
      }
    }
  }
  if (const YAML::Node& env = node["env"]) {
    if (!env.IsMap()) r.fail(env, field + ".env", "must be a mapping like {HF_HOME: /data/hf}");
    for (const auto& entry : env) {
      std::string name = entry.first.Scalar();
      if (name == "GPUFRAC_API_KEY" || name == "VLLM_API_KEY") {
        r.fail(entry.first, field + ".env." + name,
               "is the node's own key for its engines (the router sends it); remove it, and give "
               "the clients' keys as api_keys, api_keys_file or api_keys_env");
      }
      model.env.emplace_back(name, r.scalar(entry.second, field + ".env." + name));
    }
  }
  if (node["health"]) {
    model.health_path = r.text(node["health"], field + ".health");
    if (model.health_path[0] != '/') r.fail(node["health"], field + ".health", "must be a path like /health");
  }
  if (node["startup_timeout"]) {
    model.startup_timeout_s = r.parsed(node["startup_timeout"], field + ".startup_timeout",
                                       [&](const std::string& v) {
                                         return parse_seconds(v, field + ".startup_timeout");
                                       });
    if (model.startup_timeout_s <= 0) {
      r.fail(node["startup_timeout"], field + ".startup_timeout", "must be positive, like 600s");
    }
  }
  if (node["fraction"]) parse_fraction(r, node["fraction"], field + ".fraction", model.fraction);
  if (node["replicas"]) {
    int64_t replicas = r.parsed(node["replicas"], field + ".replicas",
                                [&](const std::string& v) { return parse_int(v, field + ".replicas"); });
    if (replicas < 1 || replicas > 64) r.fail(node["replicas"], field + ".replicas", "must be 1..64");
    model.replicas = int(replicas);
  }
  if (const YAML::Node& gpu = node["gpu"]) {
    model.gpu = std::string(trim(r.scalar(gpu, field + ".gpu")));
    if (model.gpu.empty()) {
      r.fail(gpu, field + ".gpu",
             "is empty; give a GPU's index or UUID (gpufrac gpus lists them), or drop gpu to let "
             "placement choose");
    }
  }
  parse_resilience(r, node, field, model);
  parse_access(r, node, field, model);
  return model;
}

}  // namespace

// memory: {min: 9G, max: 40G}. Amounts of one kind are compared here; a share against bytes only
// on the device (placement.h).
void parse_elastic_memory(const YamlReader& r, const YAML::Node& node, const std::string& field,
                          FractionSpec& fraction) {
  r.check_keys(node, field, {"min", "max"});
  for (const char* bound : {"min", "max"}) {
    if (!node[bound]) {
      r.fail(node, field + "." + bound,
             "missing; elastic memory gives both, like memory: {min: 9G, max: 40G} (or shares, "
             "{min: 0.06, max: 0.25})");
    }
  }
  fraction.memory_min = parse_memory_amount(r, node["min"], field + ".min", /*zero_allowed=*/true);
  fraction.memory_max = parse_memory_amount(r, node["max"], field + ".max", /*zero_allowed=*/false);
  const MemoryAmount& min = *fraction.memory_min;
  const MemoryAmount& max = *fraction.memory_max;
  bool above = (min.bytes && max.bytes && *min.bytes > *max.bytes) ||
               (min.share && max.share && *min.share > *max.share);
  if (above) {
    r.fail(node, field,
           "min (" + amount_text(min) + ") is above max (" + amount_text(max) +
               "); give min <= max, like {min: 9G, max: 40G}");
  }
}

std::string_view sharing_mode_name(SharingMode mode) {
  switch (mode) {
    case SharingMode::kDedicated: return "dedicated";
    case SharingMode::kTimeslice: return "timeslice";
    case SharingMode::kFractions: return "fractions";
  }
  return "?";
}

std::string_view placement_policy_name(PlacementPolicy policy) {
  return policy == PlacementPolicy::kBinpack ? "binpack" : "spread";
}

NodeSpec parse_node_spec(const std::string& yaml_text, const std::string& source) {
  YamlReader r(source);
  YAML::Node root = r.load(yaml_text);
  if (!root.IsMap()) throw UsageError(source + ": a node spec is a mapping with at least models:");
  r.check_keys(root, "",
               {"name", "listen", "run_dir", "device", "gpus", "mode", "placement",
                "oversubscribe_compute", "context_reserve", "memcap_library", "mps_control",
                "drain_timeout", "stop_timeout", "models"});
  NodeSpec spec;
  spec.source = source;
  if (root["name"]) {
    spec.name = r.text(root["name"], "name");
    if (spec.name.find_first_of("/ \t") != std::string::npos || spec.name[0] == '.') {
      r.fail(root["name"], "name", "'" + spec.name + "' cannot name a directory; use letters, digits, - or _");
    }
  }
  if (root["listen"]) parse_listen(r, root["listen"], spec);
  if (root["run_dir"]) spec.run_dir = r.text(root["run_dir"], "run_dir");
  if (const YAML::Node& device = root["device"]) {
    std::string v = r.scalar(device, "device");
    if (v == "auto") spec.device = DeviceKind::kAuto;
    else if (v == "cuda" || v == "gpu") spec.device = DeviceKind::kCuda;
    else if (v == "cpu") spec.device = DeviceKind::kCpu;
    else r.fail(device, "device", "'" + v + "' is not a device; use auto, cuda or cpu");
  }
  if (root["gpus"]) parse_gpus(r, root["gpus"], spec);
  if (root["mode"]) spec.mode = parse_mode(r, root["mode"], "mode");
  if (const YAML::Node& placement = root["placement"]) {
    std::string v = r.scalar(placement, "placement");
    if (v == "binpack") spec.placement = PlacementPolicy::kBinpack;
    else if (v == "spread") spec.placement = PlacementPolicy::kSpread;
    else r.fail(placement, "placement", "'" + v + "' is not a policy; use binpack or spread");
  }
  if (root["oversubscribe_compute"]) {
    spec.oversubscribe_compute = r.boolean(root["oversubscribe_compute"], "oversubscribe_compute");
  }
  if (root["context_reserve"]) {
    spec.context_reserve_bytes = r.parsed(root["context_reserve"], "context_reserve",
                                          [](const std::string& v) { return parse_bytes(v, "context_reserve"); });
  }
  if (root["memcap_library"]) spec.memcap_library = r.text(root["memcap_library"], "memcap_library");
  if (root["mps_control"]) spec.mps_control = r.text(root["mps_control"], "mps_control");
  for (auto [key, slot] : {std::pair{"drain_timeout", &spec.drain_timeout_s},
                           std::pair{"stop_timeout", &spec.stop_timeout_s}}) {
    if (!root[key]) continue;
    *slot = r.parsed(root[key], key, [&](const std::string& v) { return parse_seconds(v, key); });
    if (*slot < 0) r.fail(root[key], key, "must not be negative");
  }
  const YAML::Node& models = root["models"];
  if (!models || !models.IsSequence() || models.size() == 0) {
    r.fail(models ? models : root, "models", "missing or empty; list at least one model (name, model or command, fraction)");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < models.size(); ++i) {
    std::string field = "models[" + std::to_string(i) + "]";
    ModelSpec model = parse_model(r, models[i], field);
    if (!names.insert(model.name).second) {
      r.fail(models[i]["name"], field + ".name", "'" + model.name + "' is used twice; give each model its own name");
    }
    spec.models.push_back(std::move(model));
  }
  for (size_t i = 1; i < spec.models.size(); ++i) {
    if (spec.models[i].has_api_keys() == spec.models[0].has_api_keys()) continue;
    size_t keyless = spec.models[i].has_api_keys() ? 0 : i;
    size_t keyed = keyless == 0 ? i : 0;
    r.fail(models[keyless], "models[" + std::to_string(keyless) + "]",
           "has no api_keys, api_keys_file or api_keys_env while models[" + std::to_string(keyed) +
               "] has; give every model the keys that may call it (one key may be listed "
               "for several models), or give none");
  }
  return spec;
}

NodeSpec load_node_spec(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(path + ": cannot read the node spec; check the path");
  std::stringstream text;
  text << in.rdbuf();
  return parse_node_spec(text.str(), path);
}

std::string default_run_dir(const std::string& node_name) {
  const char* base = std::getenv("GPUFRAC_RUN_DIR");
  std::string dir = base && *base ? base : "/tmp/gpufrac-" + std::to_string(::getuid());
  return dir + "/" + node_name;
}

std::string resolve_run_dir(const NodeSpec& spec) {
  return spec.run_dir.empty() ? default_run_dir(spec.name) : spec.run_dir;
}

}  // namespace gpufrac
