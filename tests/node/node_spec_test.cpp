// Node spec parsing and validation: good specs parse to the right fields; each bad spec fails
// with one line that names the field and says how to fix it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "node/node_spec.h"

namespace gpufrac {
namespace {

std::string error_of(const std::string& yaml) {
  try {
    parse_node_spec(yaml, "spec.yaml");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(NodeSpec, FullSpecParses) {
  NodeSpec spec = parse_node_spec(R"(
name: demo
listen: 0.0.0.0:9000
device: cpu
gpus: [{gpu: 0, mode: timeslice}, 1]
mode: fractions
placement: spread
oversubscribe_compute: true
context_reserve: 1G
drain_timeout: 5s
models:
  - name: qwen-a
    model: qwen3-4b
    engine_args: {max-num-seqs: 32, --max-model-len: 4096, enforce-eager: true, skip: false}
    fraction: {compute: 0.5, memory: 0.45}
    replicas: 2
    env: {HF_HOME: /data}
    restart_wait: 2m
    queue_limit: 16
    failure_limit: 0
  - name: vllm-b
    command: vllm serve Q --port {port} --gpu-memory-utilization {gpu_memory_utilization}
    health: /ready
    startup_timeout: 20m
    fraction: {compute: 50%, memory: 19968M}
    gpu: GPU-5a7c
)", "spec.yaml");
  EXPECT_EQ(spec.name, "demo");
  EXPECT_EQ(spec.listen_host, "0.0.0.0");
  EXPECT_EQ(spec.listen_port, 9000);
  EXPECT_EQ(spec.device, DeviceKind::kCpu);
  ASSERT_EQ(spec.gpus.size(), 2u);
  EXPECT_EQ(spec.gpus[0].mode, SharingMode::kTimeslice);
  EXPECT_FALSE(spec.gpus[1].mode.has_value());
  EXPECT_EQ(spec.placement, PlacementPolicy::kSpread);
  EXPECT_TRUE(spec.oversubscribe_compute);
  EXPECT_EQ(spec.context_reserve_bytes, uint64_t(1) << 30);
  EXPECT_DOUBLE_EQ(spec.drain_timeout_s, 5);
  ASSERT_EQ(spec.models.size(), 2u);
  const ModelSpec& a = spec.models[0];
  EXPECT_TRUE(a.builtin());
  EXPECT_EQ(a.model, "qwen3-4b");
  ASSERT_EQ(a.engine_args.size(), 3u);  // "skip: false" drops the flag
  EXPECT_EQ(a.engine_args[1], (std::pair<std::string, std::string>{"max-model-len", "4096"}));
  EXPECT_EQ(a.engine_args[2], (std::pair<std::string, std::string>{"enforce-eager", ""}));
  EXPECT_DOUBLE_EQ(*a.fraction.compute, 0.5);
  EXPECT_DOUBLE_EQ(*a.fraction.memory_share, 0.45);
  EXPECT_EQ(a.replicas, 2);
  EXPECT_DOUBLE_EQ(a.restart_wait_s, 120);
  EXPECT_EQ(a.queue_limit, 16u);
  EXPECT_EQ(a.failure_limit, 0);
  EXPECT_EQ(a.gpu, "");  // placement picks
  const ModelSpec& b = spec.models[1];
  EXPECT_EQ(b.gpu, "GPU-5a7c");
  EXPECT_FALSE(b.builtin());
  EXPECT_EQ(b.health_path, "/ready");
  EXPECT_DOUBLE_EQ(b.startup_timeout_s, 1200);
  EXPECT_DOUBLE_EQ(*b.fraction.compute, 0.5);
  EXPECT_EQ(*b.fraction.memory_bytes, uint64_t(19968) << 20);
}

TEST(NodeSpec, DefaultsAndPortOnlyListen) {
  NodeSpec spec = parse_node_spec("listen: 8123\nmodels: [{name: m, model: tiny}]\n", "s");
  EXPECT_EQ(spec.name, "default");
  EXPECT_EQ(spec.listen_host, "127.0.0.1");
  EXPECT_EQ(spec.listen_port, 8123);
  EXPECT_EQ(spec.mode, SharingMode::kFractions);
  EXPECT_TRUE(spec.gpus_auto);
  EXPECT_EQ(spec.models[0].replicas, 1);
  EXPECT_EQ(spec.models[0].health_path, "/health");
  EXPECT_DOUBLE_EQ(spec.models[0].restart_wait_s, 30);
  EXPECT_EQ(spec.models[0].queue_limit, 256u);
  EXPECT_EQ(spec.models[0].failure_limit, 5);
}

TEST(NodeSpec, MemoryNumbersAboveOneAreBytes) {
  NodeSpec spec = parse_node_spec(
      "models: [{name: m, model: tiny, fraction: {compute: 1, memory: 1073741824}}]", "s");
  EXPECT_EQ(*spec.models[0].fraction.memory_bytes, uint64_t(1) << 30);
  EXPECT_DOUBLE_EQ(*spec.models[0].fraction.compute, 1.0);
}

TEST(NodeSpec, ElasticMemoryIsAFloorAndACeiling) {
  NodeSpec spec = parse_node_spec(R"(
models:
  - {name: a, model: tiny, fraction: {compute: 0.5, memory: {min: 9G, max: 40G}}}
  - {name: b, model: tiny, fraction: {compute: 0.25, memory: {min: 0.06, max: 25%}}}
  - {name: c, model: tiny, fraction: {compute: 0.25, memory: {min: 0, max: 0.5}}}
  - {name: d, model: tiny, fraction: {compute: 0.25, memory: 0.25}}
)",
                                  "s");
  const FractionSpec& a = spec.models[0].fraction;
  ASSERT_TRUE(a.elastic_memory());
  EXPECT_EQ(*a.memory_min->bytes, 9 * (uint64_t(1) << 30));
  EXPECT_EQ(*a.memory_max->bytes, 40 * (uint64_t(1) << 30));
  EXPECT_FALSE(a.memory_share || a.memory_bytes);
  const FractionSpec& b = spec.models[1].fraction;
  EXPECT_DOUBLE_EQ(*b.memory_min->share, 0.06);
  EXPECT_DOUBLE_EQ(*b.memory_max->share, 0.25);
  EXPECT_EQ(*spec.models[2].fraction.memory_min->bytes, 0u);  // no floor: all shared
  EXPECT_FALSE(spec.models[3].fraction.elastic_memory());
  EXPECT_DOUBLE_EQ(*spec.models[3].fraction.memory_share, 0.25);
}

struct BadSpec {
  const char* yaml;
  const char* field;  // must appear in the message
  const char* fix;    // and so must this part of the fix
};

class NodeSpecErrors : public ::testing::TestWithParam<BadSpec> {};

TEST_P(NodeSpecErrors, NameTheFieldAndTheFix) {
  std::string message = error_of(GetParam().yaml);
  ASSERT_FALSE(message.empty()) << "spec was accepted:\n" << GetParam().yaml;
  EXPECT_NE(message.find(GetParam().field), std::string::npos) << message;
  EXPECT_NE(message.find(GetParam().fix), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
  EXPECT_EQ(message.rfind("spec.yaml", 0), 0u) << message;
}

INSTANTIATE_TEST_SUITE_P(
    All, NodeSpecErrors,
    ::testing::Values(
        BadSpec{"models: [{name: a, model: tiny}]\nlisten: nowhere", "listen", "127.0.0.1:8000"},
        BadSpec{"models: []", "models", "at least one model"},
        BadSpec{"name: x", "models", "at least one model"},
        BadSpec{"models: [{model: tiny}]", "models[0].name", "needs a name"},
        BadSpec{"models: [{name: a, model: tiny}, {name: a, model: tiny}]", "models[1].name",
                "its own name"},
        BadSpec{"models: [{name: 'a b', model: tiny}]", "models[0].name", "rename"},
        BadSpec{"models: [{name: a}]", "models[0].model", "preset"},
        BadSpec{"models: [{name: a, model: tiny, fractoin: {}}]", "models[0].fractoin",
                "use one of: name"},
        BadSpec{"models: [{name: a, model: tiny, fraction: {compute: 1.5}}]",
                "models[0].fraction.compute", "(0, 1]"},
        BadSpec{"models: [{name: a, model: tiny, fraction: {compute: 0}}]",
                "models[0].fraction.compute", "(0, 1]"},
        BadSpec{"models: [{name: a, model: tiny, fraction: {memory: 20Q}}]",
                "models[0].fraction.memory", "size in bytes"},
        BadSpec{"models: [{name: a, model: tiny, fraction: {memory: 150%}}]",
                "models[0].fraction.memory", "(0, 1]"},
        BadSpec{"models: [{name: a, model: tiny, fraction: {memory: {min: 40G, max: 9G}}}]",
                "models[0].fraction.memory", "min <= max"},
        BadSpec{"models: [{name: a, model: tiny, fraction: {memory: {min: 0.5, max: 0.25}}}]",
                "models[0].fraction.memory", "min <= max"},
        BadSpec{"models: [{name: a, model: tiny, fraction: {memory: {min: 9G}}}]",
                "models[0].fraction.memory.max", "gives both, like memory: {min: 9G, max: 40G}"},
        BadSpec{"models: [{name: a, model: tiny, fraction: {memory: {max: 40G}}}]",
                "models[0].fraction.memory.min", "gives both"},
        BadSpec{"models: [{name: a, model: tiny, fraction: {memory: {min: 9Q, max: 40G}}}]",
                "models[0].fraction.memory.min", "size in bytes"},
        BadSpec{"models: [{name: a, model: tiny, fraction: {memory: {min: 9G, max: 0}}}]",
                "models[0].fraction.memory.max", "(0, 1]"},
        BadSpec{"models: [{name: a, model: tiny, fraction: {memory: {min: 1G, max: 2G, step: 1}}}]",
                "models[0].fraction.memory.step", "use one of: min, max"},
        BadSpec{"models: [{name: a, model: tiny, replicas: 0}]", "models[0].replicas", "1..64"},
        BadSpec{"models: [{name: a, command: 'serve --port 80'}]", "models[0].command", "{port}"},
        BadSpec{"models: [{name: a, command: 'x {port}', model: tiny}]", "models[0].model",
                "command:"},
        BadSpec{"models: [{name: a, engine: docker, model: tiny}]", "models[0].engine", "builtin"},
        BadSpec{"models: [{name: a, model: tiny, engine_args: {port: 1}}]",
                "models[0].engine_args.port", "set by the node"},
        BadSpec{"models: [{name: a, model: tiny, health: ready}]", "models[0].health", "/health"},
        BadSpec{"models: [{name: a, model: tiny, gpu: ' '}]", "models[0].gpu", "index or UUID"},
        BadSpec{"models: [{name: a, model: tiny, restart_wait: soon}]", "models[0].restart_wait",
                "30s"},
        BadSpec{"models: [{name: a, model: tiny, restart_wait: 2h}]", "models[0].restart_wait",
                "0..3600"},
        BadSpec{"models: [{name: a, model: tiny, queue_limit: -1}]", "models[0].queue_limit",
                "like 256"},
        BadSpec{"models: [{name: a, model: tiny, failure_limit: 5000}]", "models[0].failure_limit",
                "like 5"},
        BadSpec{"mode: shared\nmodels: [{name: a, model: tiny}]", "mode", "fractions"},
        BadSpec{"placement: random\nmodels: [{name: a, model: tiny}]", "placement", "spread"},
        BadSpec{"device: tpu\nmodels: [{name: a, model: tiny}]", "device", "cpu"},
        BadSpec{"gpus: [0, 0]\nmodels: [{name: a, model: tiny}]", "gpus[1]", "once"},
        BadSpec{"gpus: [{mode: dedicated}]\nmodels: [{name: a, model: tiny}]", "gpus[0].gpu",
                "index or UUID"},
        BadSpec{"oversubscribe_compute: maybe\nmodels: [{name: a, model: tiny}]",
                "oversubscribe_compute", "true or false"},
        BadSpec{"context_reserve: lots\nmodels: [{name: a, model: tiny}]", "context_reserve",
                "size in bytes"},
        BadSpec{"name: ../x\nmodels: [{name: a, model: tiny}]", "name", "directory"},
        BadSpec{"mode: fractions\nmode: timeslice\nmodels: [{name: a, model: tiny}]", "mode",
                "given twice"},
        BadSpec{"models: [{name: a, model: tiny, name: b}]", "models[0].name", "given twice"},
        BadSpec{"models: [{name: a, model: tiny}\n", "spec.yaml:", "not valid YAML"},
        BadSpec{"models: [{name: a, model: tiny, api_keys: []}]", "models[0].api_keys",
                "api_keys_env"},
        BadSpec{"models: [{name: a, model: tiny, api_keys: [k1, [k2]]}]", "models[0].api_keys[1]",
                "a string"},
        BadSpec{"models: [{name: a, model: tiny, api_keys_env: 1KEYS}]", "models[0].api_keys_env",
                "QWEN_A_KEYS"},
        BadSpec{"models: [{name: a, model: tiny, max_requests_in_flight: 0}]",
                "models[0].max_requests_in_flight", "1..1048576"},
        BadSpec{"models: [{name: a, model: tiny, requests_per_second: 0}]",
                "models[0].requests_per_second", "like 10 or 0.5"},
        BadSpec{"models: [{name: a, model: tiny, env: {VLLM_API_KEY: x}}]",
                "models[0].env.VLLM_API_KEY", "api_keys_env"},
        BadSpec{"models: [{name: a, model: tiny, env: {GPUFRAC_API_KEY: x}}]",
                "models[0].env.GPUFRAC_API_KEY", "router sends it"},
        BadSpec{"models: [{name: a, model: tiny, api_keys: [k]}, {name: b, model: tiny}]",
                "models[1]", "give every model the keys"},
        BadSpec{"models: [{name: a, model: tiny}, {name: b, model: tiny, api_keys_env: B}]",
                "models[0]", "or give none"}));

TEST(NodeSpec, KeysAndLimitsParse) {
  NodeSpec spec = parse_node_spec(R"(
models:
  - {name: a, model: tiny, api_keys: [ka, 'sk-A.b~c'], max_requests_in_flight: 32}
  - {name: b, model: tiny, api_keys_file: /etc/keys/b, api_keys_env: B_KEYS, requests_per_second: 0.5}
)",
                                  "spec.yaml");
  EXPECT_EQ(spec.models[0].api_keys, (std::vector<std::string>{"ka", "sk-A.b~c"}));
  EXPECT_TRUE(spec.models[0].has_api_keys());
  EXPECT_EQ(spec.models[0].max_requests_in_flight, 32);
  EXPECT_EQ(spec.models[0].requests_per_second, 0);
  EXPECT_EQ(spec.models[1].api_keys_file, "/etc/keys/b");
  EXPECT_EQ(spec.models[1].api_keys_env, "B_KEYS");
  EXPECT_DOUBLE_EQ(spec.models[1].requests_per_second, 0.5);
  EXPECT_EQ(spec.models[1].max_requests_in_flight, 0);
  EXPECT_FALSE(parse_node_spec("models: [{name: a, model: tiny}]", "s").models[0].has_api_keys());
}

TEST(NodeSpec, ABadKeyIsNamedByItsFieldNeverQuoted) {
  std::string message =
      error_of("models:\n  - name: a\n    model: tiny\n    api_keys: [good, 'top secret']\n");
  EXPECT_NE(message.find("spec.yaml:4: models[0].api_keys[1]"), std::string::npos) << message;
  EXPECT_NE(message.find("without spaces or commas"), std::string::npos) << message;
  EXPECT_EQ(message.find("secret"), std::string::npos) << message;
  EXPECT_EQ(message.find("good"), std::string::npos) << message;
}

TEST(NodeSpec, ErrorsCarryTheLine) {
  std::string message = error_of("name: x\nmodels:\n  - name: a\n    model: tiny\n    replicas: -1\n");
  EXPECT_NE(message.find("spec.yaml:5:"), std::string::npos) << message;
}

TEST(NodeSpec, TheSpecsInDocsNodeMdParse) {
  const char* source = std::getenv("GPUFRAC_SOURCE_DIR");
  ASSERT_NE(source, nullptr);
  std::ifstream in(std::string(source) + "/docs/node.md");
  ASSERT_TRUE(in) << "docs/node.md not found";
  std::string line, block;
  bool in_yaml = false;
  int parsed = 0;
  while (std::getline(in, line)) {
    if (line == "```yaml") {
      in_yaml = true;
      block.clear();
    } else if (in_yaml && line == "```") {
      in_yaml = false;
      EXPECT_NO_THROW(parse_node_spec(block, "docs/node.md")) << block;
      ++parsed;
    } else if (in_yaml) {
      block += line + "\n";
    }
  }
  EXPECT_GE(parsed, 3);
}

}  // namespace
}  // namespace gpufrac
