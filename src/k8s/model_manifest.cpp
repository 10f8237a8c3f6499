#include "k8s/model_manifest.h"

#include "common/error.h"
#include "k8s/manifest_parts.h"
#include "node/model_launch.h"

namespace gpufrac::k8s {
namespace {

constexpr const char* kSmShareAnnotation = "gpufrac/sm-share";
constexpr uint64_t kMiB = uint64_t(1) << 20;

std::string field_of(const ModelObject& model) {
  return "models[" + std::to_string(model.index) + "]";
}

// KAI's placement annotation for the model's memory, and gpufrac's for its compute.
Object pod_annotations(const NodeSpec& spec, const ModelObject& model) {
  const ModelSpec& m = spec.models[model.index];
  Object annotations = {{"gpufrac/model", m.name}};
  if (spec.mode == SharingMode::kDedicated) return annotations;
  std::string field = spec.source + ": " + field_of(model) + ".fraction.memory";
  if (m.fraction.elastic_memory()) {
    throw UsageError(field + ": {min, max} is elastic memory, which gpufrac up shares on a GPU; " +
                     "KAI gives each pod a fixed part: use a share like 0.25 or bytes like 20G");
  }
  if (m.fraction.memory_share) {
    if (*m.fraction.memory_share >= 1) {
      throw UsageError(field + ": a share of 1 is the whole GPU, which KAI gives only as " +
                       "nvidia.com/gpu: 1; use mode: dedicated, or a share below 1 like 0.5");
    }
    annotations["gpu-fraction"] = share_text(*m.fraction.memory_share);
  } else {
    uint64_t mib = *m.fraction.memory_bytes / kMiB;
    if (mib == 0)
      throw UsageError(field + ": is below 1 MiB, KAI's gpu-memory unit; give at least 1M");
    annotations["gpu-memory"] = std::to_string(mib);
  }
  if (spec.mode == SharingMode::kFractions)
    annotations[kSmShareAnnotation] = share_text(*m.fraction.compute);
  return annotations;
}

Object annotation_env(const std::string& name, const std::string& annotation) {
  return Object{
      {"name", name},
      {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.annotations['" + annotation + "']"}}}}}};
}

Object container_env(const NodeSpec& spec, const ModelObject& model, const Object& annotations) {
  Object env = Object::array();
  if (annotations.contains(kSmShareAnnotation))
    env.push_back(annotation_env("GPUFRAC_SM_SHARE", kSmShareAnnotation));
  if (annotations.contains("gpu-memory"))
    env.push_back(annotation_env("GPUFRAC_GPU_MEMORY_MIB", "gpu-memory"));
  for (const auto& [name, value] : spec.models[model.index].env)
    env.push_back({{"name", name}, {"value", value}});
  return env;
}

}  // namespace

std::vector<std::string> model_container_command(const NodeSpec& spec, const ModelObject& model,
                                                 const RenderOptions& options) {
  const ModelSpec& m = spec.models[model.index];
  std::vector<std::string> command = {"gpufrac", "k8s", "exec"};
  if (spec.mode != SharingMode::kFractions)
    command.insert(command.end(), {"--mode", std::string(sharing_mode_name(spec.mode))});
  if (options.agent_root != kDefaultAgentRoot)
    command.insert(command.end(), {"--agent-root", options.agent_root});
  if (spec.context_reserve_bytes != NodeSpec{}.context_reserve_bytes) {
    command.insert(command.end(),
                   {"--context-reserve", std::to_string(spec.context_reserve_bytes)});
  }
  command.insert(command.end(),
                 {"--health-url", "http://127.0.0.1:" + std::to_string(kEnginePort) + m.health_path,
                  "--startup-timeout", seconds_flag(m.startup_timeout_s), "--stop-timeout",
                  seconds_flag(spec.stop_timeout_s), "--"});
  std::vector<std::string> engine;
  if (m.builtin()) {
    engine = builtin_engine_argv("gpufrac", m, "cuda", "0.0.0.0", kEnginePort);
  } else {
    // What exec fills at start stays a placeholder.
    std::vector<std::pair<std::string, std::string>> values = {
        {"port", std::to_string(kEnginePort)}, {"name", m.name}};
    for (const char* late : {"gpu", "gpu_uuid", "memory_bytes", "gpu_memory_utilization"}) {
      values.emplace_back(late, "{" + std::string(late) + "}");
    }
    engine = shell_command_argv(
        expand_placeholders(m.command, values, spec.source + ": " + field_of(model) + ".command"));
  }
  command.insert(command.end(), engine.begin(), engine.end());
  return command;
}

Object model_deployment(const NodeSpec& spec, const ModelObject& model,
                        const RenderOptions& options) {
  const ModelSpec& m = spec.models[model.index];
  Object labels = object_labels(model.name, model.instance, "model");
  Object pod_labels = labels;
  pod_labels["kai.scheduler/queue"] = options.queue;
  Object annotations = pod_annotations(spec, model);

  Object container = {{"name", "main"},
                      {"image", options.image},
                      {"command", model_container_command(spec, model, options)}};
  Object env = container_env(spec, model, annotations);
  if (!env.empty()) container["env"] = env;
  container["ports"] = Object::array(
      {Object{{"name", "http"}, {"containerPort", kEnginePort}, {"protocol", "TCP"}}});
  // A slow engine (vLLM loading weights) gets its startup_timeout before liveness applies.
  int startup_period_s = 5;
  container["startupProbe"] =
      http_probe(m.health_path, startup_period_s,
                 std::max(1, whole_seconds(m.startup_timeout_s / startup_period_s)));
  container["readinessProbe"] = http_probe(m.health_path, 2, 2);
  container["livenessProbe"] = http_probe(m.health_path, 10, 3);
  if (spec.mode == SharingMode::kDedicated)
    container["resources"] = {{"limits", {{"nvidia.com/gpu", 1}}}};
  container["securityContext"] = {{"allowPrivilegeEscalation", false}};

  Object pod = {{"schedulerName", "kai-scheduler"},
                {"runtimeClassName", "nvidia"},
                {"automountServiceAccountToken", false},
                {"terminationGracePeriodSeconds", whole_seconds(spec.stop_timeout_s) + 5},
                // One MPS server serves one user id at a time: every pod sharing a GPU runs as one.
                {"securityContext",
                 {{"runAsNonRoot", true}, {"runAsUser", kPodUid}, {"runAsGroup", kPodUid}}},
                {"tolerations", gpu_node_tolerations()}};
  bool mps = spec.mode == SharingMode::kFractions;
  if (mps) {
    container["volumeMounts"] =
        Object::array({Object{{"name", "gpufrac-agent"}, {"mountPath", options.agent_root}},
                       Object{{"name", "mps-shm"}, {"mountPath", "/dev/shm"}}});
  }
  pod["containers"] = Object::array({container});
  if (mps) {
    pod["volumes"] =
        Object::array({host_path_volume("gpufrac-agent", options.agent_root),
                       host_path_volume("mps-shm", agent_shm_dir(options.agent_root))});
  }

  Object metadata = object_metadata(model.name, options.namespace_name, pod_labels);
  return Object{
      {"apiVersion", "apps/v1"},
      {"kind", "Deployment"},
      {"metadata", metadata},
      {"spec",
       {{"replicas", m.replicas},
        {"selector", {{"matchLabels", selector_labels(model.name)}}},
        {"template",
         {{"metadata", {{"labels", pod_labels}, {"annotations", annotations}}}, {"spec", pod}}}}}};
}

Object model_service(const ModelObject& model, const RenderOptions& options) {
  Object port = {
      {"name", "http"}, {"port", kEnginePort}, {"targetPort", "http"}, {"protocol", "TCP"}};
  return Object{
      {"apiVersion", "v1"},
      {"kind", "Service"},
      {"metadata", object_metadata(model.name, options.namespace_name,
                                   object_labels(model.name, model.instance, "model"))},
      {"spec", {{"selector", selector_labels(model.name)}, {"ports", Object::array({port})}}}};
}

}  // namespace gpufrac::k8s
