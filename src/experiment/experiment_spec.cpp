#include "experiment/experiment_spec.h"

#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/strings.h"
#include "common/yaml_reader.h"

namespace gpufrac {
namespace {

// The reference study's workload on one H200: ISL 2048 / OSL 256, c = 1..32 per model, the three
// arms at 2 models per GPU, fractions also at 4 and 8, and the light-load packing search (12
// requests per model and probe: about two minutes of arrivals at 0.1 requests/s).
constexpr const char* kGpuDefault = R"(name: gpu-qwen3-4b
model: qwen3-4b
device: cuda
gpus: 1
engine_args: {max-num-seqs: 32, max-model-len: 4096}
workload: {isl: 2048, osl: 256, requests: auto, warmup: auto}
runs:
  - {arm: dedicated, models_per_gpu: 1, concurrency: [1, 2, 4, 8, 16, 32]}
  - {arm: timeslice, models_per_gpu: 2, concurrency: [1, 2, 4, 8, 16, 32]}
  - {arm: fractions, models_per_gpu: 2, concurrency: [1, 2, 4, 8, 16, 32]}
  - {arm: fractions, models_per_gpu: [4, 8], concurrency: [1, 2, 4]}
slo: {ttft_p90_ms: 1000, itl_p50_ms: 30}
packing_search: {arm: fractions, rate: 0.1, max_models_per_gpu: 16, requests: 12}
cost: {price_per_node_hour: 1.0, gpus_per_node: 8, models: 16}
output: experiment-results/gpu-qwen3-4b
)";

// Without a GPU: the tiny preset on the CPU cores, a short sweep (about a minute on 2 cores); 32
// requests per point, so that a point outlasts the bursts of other work on a small machine.
constexpr const char* kCpuDefault = R"(name: cpu-tiny
model: tiny
device: cpu
gpus: 1
engine_args: {max-num-seqs: 16, max-model-len: 512}
workload: {isl: 128, osl: 32, requests: 32, warmup: 4}
runs:
  - {arm: dedicated, models_per_gpu: 1, concurrency: [1, 2, 4]}
  - {arm: timeslice, models_per_gpu: 2, concurrency: [1, 2]}
  - {arm: fractions, models_per_gpu: 2, concurrency: [1, 2]}
slo: {ttft_p90_ms: 2000, itl_p50_ms: 200}
cost: {price_per_node_hour: 1.0, gpus_per_node: 8, models: 16}
output: experiment-results/cpu-tiny
)";

const std::vector<std::string> kArms = {"dedicated", "timeslice", "fractions"};

std::optional<int> count_or_auto(const YamlReader& r, const YAML::Node& node,
                                 const std::string& field) {
  if (!node || (node.IsScalar() && node.Scalar() == "auto")) return std::nullopt;
  return int(r.integer(node, field, 0, 1'000'000));
}

std::vector<int> to_ints(const std::vector<int64_t>& values) {
  return std::vector<int>(values.begin(), values.end());
}

ExperimentRun parse_run(const YamlReader& r, const YAML::Node& node, const std::string& field) {
  r.check_keys(node, field, {"arm", "models_per_gpu", "concurrency", "rates"});
  ExperimentRun run;
  if (!node["arm"]) r.fail(node, field + ".arm", "is missing; use dedicated, timeslice or fractions");
  run.arm = r.choice(node["arm"], field + ".arm", kArms);
  run.models_per_gpu = node["models_per_gpu"]
                           ? to_ints(r.integers(node["models_per_gpu"], field + ".models_per_gpu", 1, 48))
                           : std::vector<int>{run.arm == "dedicated" ? 1 : 2};
  if (run.arm == "dedicated" && run.models_per_gpu != std::vector<int>{1}) {
    r.fail(node["models_per_gpu"], field + ".models_per_gpu",
           "a dedicated GPU holds one model; use models_per_gpu: 1 (or a shared arm)");
  }
  if (node["concurrency"] && node["rates"]) {
    r.fail(node, field, "give either concurrency (closed loop) or rates (open loop), not both");
  }
  if (node["rates"]) {
    run.rates = r.numbers(node["rates"], field + ".rates", 1e-6, 1e6);
  } else if (node["concurrency"]) {
    run.concurrency = to_ints(r.integers(node["concurrency"], field + ".concurrency", 1, 4096));
  } else {
    r.fail(node, field, "needs concurrency: [1, 2, 4] (closed loop) or rates: [0.1] (open loop)");
  }
  return run;
}

void parse_workload(const YamlReader& r, const YAML::Node& node, ExperimentSpec& spec) {
  r.check_keys(node, "workload",
               {"isl", "osl", "isl_stddev", "osl_stddev", "requests", "warmup", "request_timeout"});
  if (node["isl"]) spec.isl = int(r.integer(node["isl"], "workload.isl", 1, 1 << 20));
  if (node["osl"]) spec.osl = int(r.integer(node["osl"], "workload.osl", 1, 1 << 20));
  if (node["isl_stddev"]) spec.isl_stddev = r.number(node["isl_stddev"], "workload.isl_stddev", 0, 1e6);
  if (node["osl_stddev"]) spec.osl_stddev = r.number(node["osl_stddev"], "workload.osl_stddev", 0, 1e6);
  spec.requests = count_or_auto(r, node["requests"], "workload.requests");
  spec.warmup = count_or_auto(r, node["warmup"], "workload.warmup");
  if (spec.requests && *spec.requests == 0) {
    r.fail(node["requests"], "workload.requests", "must be at least 1 (or auto)");
  }
  if (node["request_timeout"]) {
    spec.request_timeout_s = r.parsed(node["request_timeout"], "workload.request_timeout",
                                      [](const std::string& v) {
                                        return parse_seconds(v, "workload.request_timeout");
                                      });
  }
}

}  // namespace

ExperimentSpec parse_experiment_spec(const std::string& yaml_text, const std::string& source) {
  YamlReader r(source);
  YAML::Node root = r.load(yaml_text);
  r.check_keys(root, "", {"name", "model", "device", "gpus", "engine_args", "workload", "runs",
                          "slo", "packing_search", "node", "cost", "output"});
  ExperimentSpec spec;
  spec.source = source;
  if (root["name"]) spec.name = r.text(root["name"], "name");
  if (root["model"]) spec.model = r.text(root["model"], "model");
  if (root["device"]) spec.device = r.choice(root["device"], "device", {"auto", "cuda", "cpu"});
  if (root["gpus"]) spec.gpus = int(r.integer(root["gpus"], "gpus", 1, 64));
  if (const YAML::Node& args = root["engine_args"]) {
    if (!args.IsMap()) r.fail(args, "engine_args", "must be a mapping of `gpufrac serve` flags, e.g. {max-num-seqs: 32}");
    for (const auto& entry : args) {
      std::string key = entry.first.Scalar();
      spec.engine_args.emplace_back(key, entry.second.IsNull() ? "" : r.scalar(entry.second, "engine_args." + key));
    }
  }
  if (root["workload"]) parse_workload(r, root["workload"], spec);
  if (const YAML::Node& node = root["node"]) {
    r.check_keys(node, "node", {"sm_ceiling", "context_reserve", "memory"});
    if (node["sm_ceiling"]) spec.sm_ceiling = r.number(node["sm_ceiling"], "node.sm_ceiling", 0.01, 1);
    if (node["context_reserve"]) {
      spec.context_reserve_bytes =
          r.parsed(node["context_reserve"], "node.context_reserve",
                   [](const std::string& v) { return parse_bytes(v, "node.context_reserve"); });
    }
    if (const YAML::Node& memory = node["memory"]) {
      if (!memory.IsMap()) {
        r.fail(memory, "node.memory", "give a floor and a ceiling, like {min: 7.75G, max: 10.5G}");
      }
      FractionSpec elastic;
      parse_elastic_memory(r, memory, "node.memory", elastic);
      spec.memory_min = elastic.memory_min;
      spec.memory_max = elastic.memory_max;
    }
  }
  const YAML::Node& runs = root["runs"];
  if (!runs || !runs.IsSequence() || runs.size() == 0) {
    r.fail(runs ? runs : root, "runs", "must list at least one run, e.g. - {arm: fractions, models_per_gpu: 2, concurrency: [1, 2]}");
  }
  for (size_t i = 0; i < runs.size(); ++i) spec.runs.push_back(parse_run(r, runs[i], YamlReader::index("runs", i)));
  if (const YAML::Node& slo = root["slo"]) {
    r.check_keys(slo, "slo", {"ttft_p90_ms", "itl_p50_ms"});
    if (slo["ttft_p90_ms"]) spec.slo.ttft_p90_ms = r.number(slo["ttft_p90_ms"], "slo.ttft_p90_ms", 0, 1e9);
    if (slo["itl_p50_ms"]) spec.slo.itl_p50_ms = r.number(slo["itl_p50_ms"], "slo.itl_p50_ms", 0, 1e9);
  }
  if (const YAML::Node& search = root["packing_search"]) {
    r.check_keys(search, "packing_search", {"arm", "rate", "max_models_per_gpu", "requests"});
    PackingSearch p;
    if (search["arm"]) p.arm = r.choice(search["arm"], "packing_search.arm", {"timeslice", "fractions"});
    if (search["rate"]) p.rate = r.number(search["rate"], "packing_search.rate", 1e-6, 1e6);
    if (search["max_models_per_gpu"]) {
      p.max_models_per_gpu = int(r.integer(search["max_models_per_gpu"], "packing_search.max_models_per_gpu", 1, 48));
    }
    if (search["requests"]) p.requests = int(r.integer(search["requests"], "packing_search.requests", 1, 1'000'000));
    spec.packing_search = p;
  }
  if (const YAML::Node& cost = root["cost"]) {
    r.check_keys(cost, "cost", {"price_per_node_hour", "gpus_per_node", "models"});
    if (cost["price_per_node_hour"]) spec.price_per_node_hour = r.number(cost["price_per_node_hour"], "cost.price_per_node_hour", 1e-9, 1e9);
    if (cost["gpus_per_node"]) spec.gpus_per_node = int(r.integer(cost["gpus_per_node"], "cost.gpus_per_node", 1, 1024));
    if (cost["models"]) spec.cost_models = int(r.integer(cost["models"], "cost.models", 1, 1'000'000));
  }
  if (root["output"]) spec.output = r.text(root["output"], "output");
  return spec;
}

ExperimentSpec load_experiment_spec(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw UsageError("cannot read the experiment spec " + path + " (check the path)");
  std::ostringstream text;
  text << file.rdbuf();
  return parse_experiment_spec(text.str(), path);
}

std::string default_experiment_yaml(bool have_gpu) { return have_gpu ? kGpuDefault : kCpuDefault; }

std::string default_experiment_name(bool have_gpu) {
  return have_gpu ? "embedded:gpu" : "embedded:cpu";
}

}  // namespace gpufrac
