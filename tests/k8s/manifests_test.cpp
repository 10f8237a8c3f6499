// What `gpufrac k8s render` puts into each object (manifests.h): the KAI fields of a model pod,
// the mode's Kubernetes form, the router's upstreams, the agent's DaemonSet, and the refusals.
#include "k8s/manifests.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "k8s/kube_names.h"
#include "k8s/yaml_writer.h"
#include "node/placement.h"

namespace gpufrac::k8s {
namespace {

constexpr const char* kMixed = R"(name: demo
models:
  - name: a
    model: qwen3-4b
    fraction: {compute: 0.25, memory: 0.5}
    replicas: 2
  - name: Org/Big
    command: vllm serve org/big --port {port} --served-model-name {name} --gpu-memory-utilization {gpu_memory_utilization}
    health: /v1/models
    fraction: {compute: 50%, memory: 20000M}
    env: {HF_HOME: /data/hf}
)";

std::vector<Manifest> render(const std::string& yaml, RenderOptions options = {}) {
  return render_manifests(parse_node_spec(yaml, "spec.yaml"), options);
}

const Object& find(const std::vector<Manifest>& manifests, const std::string& file) {
  for (const Manifest& m : manifests) {
    if (m.file == file) return m.object;
  }
  throw std::runtime_error("no " + file);
}

std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Manifests, AFractionsModelPodCarriesKaisFieldsAndGpufracsShare) {
  std::vector<Manifest> all = render(kMixed);
  const Object& a = find(all, "model-demo-a-deployment.yaml");
  EXPECT_EQ(a["spec"]["replicas"], 2);
  const Object& pod = a["spec"]["template"];
  EXPECT_EQ(pod["metadata"]["labels"]["kai.scheduler/queue"], "gpufrac");
  EXPECT_EQ(pod["metadata"]["annotations"]["gpu-fraction"], "0.5");
  EXPECT_EQ(pod["metadata"]["annotations"]["gpufrac/sm-share"], "0.25");
  EXPECT_FALSE(pod["metadata"]["annotations"].contains("gpu-memory"));
  EXPECT_EQ(pod["spec"]["schedulerName"], "kai-scheduler");
  EXPECT_EQ(pod["spec"]["runtimeClassName"], "nvidia");
  const Object& main = pod["spec"]["containers"][0];
  EXPECT_FALSE(main.contains("resources")) << "a fraction requests no nvidia.com/gpu";
  EXPECT_EQ(main["readinessProbe"]["httpGet"]["path"], "/health");
  EXPECT_EQ(main["livenessProbe"]["httpGet"]["path"], "/health");
  ASSERT_EQ(main["env"].size(), 1u);
  EXPECT_EQ(main["env"][0]["name"], "GPUFRAC_SM_SHARE");
  EXPECT_EQ(main["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.annotations['gpufrac/sm-share']");
  EXPECT_EQ(main["volumeMounts"][0]["mountPath"], "/run/gpufrac");
  EXPECT_EQ(pod["spec"]["volumes"][0]["hostPath"]["path"], "/run/gpufrac");
  std::vector<std::string> command = main["command"];
  std::vector<std::string> expected = {"gpufrac",
                                       "k8s",
                                       "exec",
                                       "--health-url",
                                       "http://127.0.0.1:8000/health",
                                       "--startup-timeout",
                                       "600s",
                                       "--stop-timeout",
                                       "10s",
                                       "--",
                                       "gpufrac",
                                       "serve",
                                       "--model",
                                       "qwen3-4b",
                                       "--device",
                                       "cuda",
                                       "--host",
                                       "0.0.0.0",
                                       "--port",
                                       "8000",
                                       "--served-model-name",
                                       "a"};
  EXPECT_EQ(command, expected);
}

TEST(Manifests, ACommandModelWithBytesAsksForGpuMemoryAndLeavesTheCapPlaceholdersToExec) {
  std::vector<Manifest> all = render(kMixed);
  const Object& big = find(all, "model-demo-org-big-deployment.yaml");
  const Object& pod = big["spec"]["template"];
  EXPECT_EQ(pod["metadata"]["annotations"]["gpu-memory"], "20000");
  EXPECT_FALSE(pod["metadata"]["annotations"].contains("gpu-fraction"))
      << "KAI takes one of the two";
  EXPECT_EQ(pod["metadata"]["annotations"]["gpufrac/model"], "Org/Big");
  const Object& main = pod["spec"]["containers"][0];
  ASSERT_EQ(main["env"].size(), 3u);
  EXPECT_EQ(main["env"][1]["name"], "GPUFRAC_GPU_MEMORY_MIB");
  EXPECT_EQ(main["env"][1]["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.annotations['gpu-memory']");
  EXPECT_EQ(main["env"][2], (Object{{"name", "HF_HOME"}, {"value", "/data/hf"}}));
  std::vector<std::string> command = main["command"];
  EXPECT_EQ(
      command.back(),
      "exec vllm serve org/big --port 8000 --served-model-name Org/Big --gpu-memory-utilization "
      "{gpu_memory_utilization}");
  EXPECT_EQ(main["readinessProbe"]["httpGet"]["path"], "/v1/models");
}

TEST(Manifests, TheRouterReachesEveryModelThroughItsService) {
  std::vector<Manifest> all = render(kMixed);
  std::vector<std::string> command =
      find(all, "router-deployment.yaml")["spec"]["template"]["spec"]["containers"][0]["command"];
  std::vector<std::string> upstreams;
  for (size_t i = 0; i + 1 < command.size(); ++i) {
    if (command[i] == "--upstream") upstreams.push_back(command[i + 1]);
  }
  EXPECT_EQ(upstreams, (std::vector<std::string>{"a=http://demo-a:8000/health",
                                                 "Org/Big=http://demo-org-big:8000/v1/models"}));
  EXPECT_EQ(find(all, "model-demo-org-big-service.yaml")["metadata"]["name"], "demo-org-big");
  EXPECT_EQ(find(all, "router-service.yaml")["spec"]["ports"][0]["port"], 8000);
}

// Only the node's router reaches its model pods; the router reads each model's keys from the
// Secret <node>-api-keys and gets the limits as flags; no key is ever in a manifest.
TEST(Manifests, KeysComeFromASecretAndOnlyTheRouterReachesTheModels) {
  std::vector<Manifest> all = render(R"(name: demo
models:
  - {name: a, model: qwen3-4b, fraction: {compute: 0.5, memory: 0.5}, api_keys_env: A_KEYS,
     max_requests_in_flight: 32, requests_per_second: 2.5}
  - {name: b, model: qwen3-4b, fraction: {compute: 0.5, memory: 0.5}, api_keys_env: SHARED}
  - {name: c, model: qwen3-4b, fraction: {compute: 0.5, memory: 0.25}, api_keys_env: SHARED}
)");
  const Object& policy = find(all, "networkpolicy.yaml");
  EXPECT_EQ(policy["kind"], "NetworkPolicy");
  EXPECT_EQ(policy["metadata"]["name"], "demo-models");
  EXPECT_EQ(policy["metadata"]["namespace"], "gpufrac");
  EXPECT_EQ(
      policy["spec"]["podSelector"]["matchLabels"],
      (Object{{"app.kubernetes.io/instance", "demo"}, {"app.kubernetes.io/component", "model"}}));
  EXPECT_EQ(policy["spec"]["policyTypes"], Object::array({"Ingress"}));
  ASSERT_EQ(policy["spec"]["ingress"].size(), 1u);
  const Object& rule = policy["spec"]["ingress"][0];
  EXPECT_EQ(
      rule["from"],
      Object::array({Object{{"podSelector", {{"matchLabels", {{"gpufrac/object", "demo"}}}}}}}));
  EXPECT_EQ(rule["ports"], Object::array({Object{{"protocol", "TCP"}, {"port", 8000}}}));
  // The selectors match what the pods carry: the model pods, and the router's.
  const Object& model_pod =
      find(all, "model-demo-a-deployment.yaml")["spec"]["template"]["metadata"]["labels"];
  for (const auto& [k, v] : policy["spec"]["podSelector"]["matchLabels"].items())
    EXPECT_EQ(model_pod[k], v) << k;
  const Object& router_pod = find(all, "router-deployment.yaml")["spec"]["template"];
  EXPECT_EQ(router_pod["metadata"]["labels"]["gpufrac/object"], "demo");

  const Object& container = router_pod["spec"]["containers"][0];
  std::vector<std::string> command = container["command"];
  auto values_of = [&](const std::string& flag) {
    std::vector<std::string> values;
    for (size_t i = 0; i + 1 < command.size(); ++i) {
      if (command[i] == flag) values.push_back(command[i + 1]);
    }
    return values;
  };
  EXPECT_EQ(values_of("--api-keys-env"),
            (std::vector<std::string>{"a=A_KEYS", "b=SHARED", "c=SHARED"}));
  EXPECT_EQ(values_of("--max-requests-in-flight"), std::vector<std::string>{"a=32"});
  EXPECT_EQ(values_of("--requests-per-second"), std::vector<std::string>{"a=2.5"});
  Object from_secret = Object::array();
  for (const char* variable : {"A_KEYS", "SHARED"}) {
    from_secret.push_back(
        {{"name", variable},
         {"valueFrom", {{"secretKeyRef", {{"name", "demo-api-keys"}, {"key", variable}}}}}});
  }
  EXPECT_EQ(container["env"], from_secret);
  EXPECT_EQ(container["readinessProbe"]["httpGet"]["path"], "/ping");
  EXPECT_EQ(container["livenessProbe"]["httpGet"]["path"], "/ping");
  // Without keys: no env, no flags, the policy all the same.
  std::vector<Manifest> keyless = render(kMixed);
  EXPECT_FALSE(
      find(keyless, "router-deployment.yaml")["spec"]["template"]["spec"]["containers"][0].contains(
          "env"));
  EXPECT_EQ(find(keyless, "networkpolicy.yaml")["kind"], "NetworkPolicy");
}

TEST(Manifests, RefusesKeysThatWouldLandInTheManifests) {
  std::string literal = usage_error([] {
    render(
        "models:\n  - {name: a, model: tiny, fraction: {compute: 1, memory: 0.5}, api_keys: "
        "[s3cret]}\n");
  });
  EXPECT_NE(literal.find("spec.yaml: models[0].api_keys: keys written in the spec"),
            std::string::npos)
      << literal;
  EXPECT_NE(literal.find("api_keys_env"), std::string::npos) << literal;
  EXPECT_EQ(literal.find("s3cret"), std::string::npos) << literal;
  std::string file = usage_error([] {
    render(
        "models:\n  - {name: a, model: tiny, fraction: {compute: 1, memory: 0.5}, api_keys_file: "
        "/k}\n");
  });
  EXPECT_NE(file.find("models[0].api_keys_file: the file is on this machine"), std::string::npos)
      << file;
}

TEST(Manifests, TheAgentRunsOnEveryGpuNodeWithHostPidAndTheSharedDirectory) {
  RenderOptions options;
  options.namespace_name = "serving";
  std::vector<Manifest> all = render(kMixed, options);
  const Object& agent = find(all, "agent-daemonset.yaml");
  EXPECT_EQ(agent["kind"], "DaemonSet");
  EXPECT_EQ(agent["metadata"]["namespace"], "serving");
  const Object& pod = agent["spec"]["template"]["spec"];
  EXPECT_EQ(pod["hostPID"], true);
  EXPECT_EQ(pod["containers"][0]["readinessProbe"]["httpGet"]["path"], "/ready");
  EXPECT_EQ(pod["volumes"][1]["hostPath"]["path"], "/run/gpufrac/shm");
  EXPECT_FALSE(find(all, "queue.yaml")["metadata"].contains("namespace"))
      << "a Queue is cluster-scoped";
}

TEST(Manifests, ModesBecomeTheirKubernetesForm) {
  std::vector<Manifest> ts =
      render("mode: timeslice\nmodels:\n  - {name: a, model: tiny, fraction: {memory: 0.25}}\n");
  const Object& pod = find(ts, "model-default-a-deployment.yaml")["spec"]["template"];
  EXPECT_EQ(pod["metadata"]["annotations"]["gpu-fraction"], "0.25");
  EXPECT_FALSE(pod["metadata"]["annotations"].contains("gpufrac/sm-share"));
  EXPECT_FALSE(pod["spec"].contains("volumes")) << "no MPS, no agent directory";
  std::vector<std::string> command = pod["spec"]["containers"][0]["command"];
  EXPECT_EQ(std::vector<std::string>(command.begin() + 3, command.begin() + 5),
            (std::vector<std::string>{"--mode", "timeslice"}));

  std::vector<Manifest> dedicated =
      render("mode: dedicated\nmodels:\n  - {name: a, model: tiny}\n");
  const Object& whole = find(dedicated, "model-default-a-deployment.yaml")["spec"]["template"];
  EXPECT_EQ(whole["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], 1);
  EXPECT_FALSE(whole["metadata"]["annotations"].contains("gpu-fraction"));
}

TEST(Manifests, RefusesWhatAClusterCannotHonourWithOneLine) {
  EXPECT_EQ(usage_error([] {
              render(
                  "device: cpu\nmodels:\n  - {name: a, model: tiny, fraction: {compute: 1, memory: "
                  "0.5}}\n");
            }),
            "spec.yaml: device: cpu runs models on this machine's cores; a cluster runs them on "
            "the GPUs KAI hands "
            "out, so remove device: cpu to render it");
  EXPECT_EQ(usage_error([] {
              render("models:\n  - {name: a, model: tiny, fraction: {compute: 1, memory: 1}}\n");
            }),
            "spec.yaml: models[0].fraction.memory: a share of 1 is the whole GPU, which KAI gives "
            "only as "
            "nvidia.com/gpu: 1; use mode: dedicated, or a share below 1 like 0.5");
  EXPECT_EQ(usage_error([] {
              render(
                  "gpus: [{gpu: 0, mode: timeslice}]\nmodels:\n  - {name: a, model: tiny, "
                  "fraction: {compute: 1, memory: 0.5}}\n");
            }),
            "spec.yaml: gpus[0].mode: KAI picks each pod's GPU, so a cluster has no per-GPU modes; "
            "set the mode "
            "for every model with mode:");
  EXPECT_EQ(usage_error([] {
              render(
                  "models:\n  - {name: a.b, model: tiny, fraction: {compute: 1, memory: 0.5}}\n"
                  "  - {name: A_B, model: tiny, fraction: {compute: 1, memory: 0.5}}\n");
            }),
            "spec.yaml: models[1].name: 'A_B' and models[0].name 'a.b' both become the Kubernetes "
            "name 'default-a-b'; "
            "rename one of them");
  EXPECT_EQ(usage_error([] {
              render(
                  "models:\n  - {name: a, model: tiny, fraction: {compute: 1, memory: {min: 1G, "
                  "max: 8G}}}\n");
            }),
            "spec.yaml: models[0].fraction.memory: {min, max} is elastic memory, which gpufrac up "
            "shares on a GPU; KAI gives each pod a fixed part: use a share like 0.25 or bytes like "
            "20G");
}

TEST(Manifests, AMissingShareIsTheErrorGpufracUpGives) {
  const std::string yaml = "models:\n  - {name: a, model: tiny, fraction: {memory: 0.5}}\n";
  NodeSpec spec = parse_node_spec(yaml, "spec.yaml");
  PlacementDevice gpu;
  gpu.uuid = "GPU-1";
  gpu.memory_bytes = uint64_t(80) << 30;
  std::string up = usage_error([&] { place_models(spec, {gpu}); });
  EXPECT_NE(up.find("models[0].fraction.compute: missing"), std::string::npos) << up;
  EXPECT_EQ(usage_error([&] { render(yaml); }), up);
}

TEST(KubeNames, MapAnyModelNameToADns1035Label) {
  EXPECT_EQ(kube_label("Qwen/Qwen3-4B"), "qwen-qwen3-4b");
  EXPECT_EQ(kube_label("--a..b__"), "a-b");
  EXPECT_EQ(kube_label("4b"), "m4b");
  EXPECT_EQ(kube_label(std::string(80, 'x')).size(), kMaxLabelLength);
  EXPECT_EQ(kube_label("///"), "m");
}

TEST(YamlWriter, QuotesEveryStringYamlWouldReadAsSomethingElse) {
  for (const char* plain :
       {"gpufrac", "kai.scheduler/queue", "http://demo-a:8000/health", "GPU-1a2b", "a=b"}) {
    EXPECT_TRUE(plain_yaml_string(plain)) << plain;
  }
  for (const char* quoted :
       {"0.5", "8000", "true", "yes", "off", "null", "~", "", "a b", "-x", "a: b",
        "x:", "metadata.annotations['gpu-memory']", "1e3", ".5", "{x}", "#c", "*a"}) {
    EXPECT_FALSE(plain_yaml_string(quoted)) << quoted;
  }
  Object value = {{"a", {{"b", "0.5"}, {"c", 1}}},
                  {"list", Object::array({Object{{"k", "v"}, {"flag", true}}, "x"})},
                  {"empty", Object::object()}};
  EXPECT_EQ(to_yaml(value),
            "a:\n  b: \"0.5\"\n  c: 1\nlist:\n  - k: v\n    flag: true\n  - x\nempty: {}\n");
}

}  // namespace
}  // namespace gpufrac::k8s
