#include "k8s/manifests.h"

#include "common/error.h"
#include "k8s/access_manifest.h"
#include "k8s/agent_manifest.h"
#include "k8s/kube_names.h"
#include "k8s/manifest_parts.h"
#include "k8s/model_manifest.h"
#include "node/placement.h"

namespace gpufrac::k8s {
namespace {

// What a node spec says that a cluster scheduled by KAI cannot do.
void refuse_node_only_fields(const NodeSpec& spec) {
  if (spec.device == DeviceKind::kCpu) {
    throw UsageError(spec.source + ": device: cpu runs models on this machine's cores; a cluster " +
                     "runs them on the GPUs KAI hands out, so remove device: cpu to render it");
  }
  for (size_t i = 0; i < spec.gpus.size(); ++i) {
    if (spec.gpus[i].mode && *spec.gpus[i].mode != spec.mode) {
      throw UsageError(
          spec.source + ": gpus[" + std::to_string(i) + "].mode: KAI picks each pod's GPU, " +
          "so a cluster has no per-GPU modes; set the mode for every model with mode:");
    }
  }
  // The fields the mode needs, checked as `gpufrac up` checks them.
  PlacementDevice device;
  device.uuid = "GPU-cluster";
  device.mode = spec.mode;
  check_fraction_fields(spec, {device});
  refuse_keys_in_files(spec);
}

Object router_deployment(const NodeSpec& spec, const ObjectNames& names,
                         const RenderOptions& options) {
  std::vector<std::string> command = {"gpufrac",
                                      "k8s",
                                      "router",
                                      "--listen",
                                      "0.0.0.0:" + std::to_string(kEnginePort),
                                      "--drain-timeout",
                                      seconds_flag(spec.drain_timeout_s)};
  for (size_t i = 0; i < spec.models.size(); ++i) {
    command.push_back("--upstream");
    command.push_back(spec.models[i].name + "=http://" + names.models[i] + ":" +
                      std::to_string(kEnginePort) + spec.models[i].health_path);
  }
  RouterAccess access = router_access(spec);
  command.insert(command.end(), access.flags.begin(), access.flags.end());
  Object labels = object_labels(names.router, names.router, "router");
  Object container = {{"name", "router"}, {"image", options.image}, {"command", command}};
  if (!access.env.empty()) container["env"] = access.env;
  container.update(Object{
      {"ports", Object::array({Object{
                    {"name", "http"}, {"containerPort", kEnginePort}, {"protocol", "TCP"}}})},
      // /ping needs no key, and answers while the router runs, whatever the models do.
      {"readinessProbe", http_probe("/ping", 2, 2)},
      {"livenessProbe", http_probe("/ping", 10, 3)},
      {"resources", {{"requests", {{"cpu", "100m"}, {"memory", "64Mi"}}}}},
      {"securityContext", {{"allowPrivilegeEscalation", false}}}});
  Object pod = {{"automountServiceAccountToken", false},
                {"terminationGracePeriodSeconds", whole_seconds(spec.drain_timeout_s) + 5},
                {"securityContext",
                 {{"runAsNonRoot", true}, {"runAsUser", kPodUid}, {"runAsGroup", kPodUid}}},
                {"containers", Object::array({container})}};
  return Object{{"apiVersion", "apps/v1"},
                {"kind", "Deployment"},
                {"metadata", object_metadata(names.router, options.namespace_name, labels)},
                {"spec",
                 {{"replicas", 1},
                  {"selector", {{"matchLabels", selector_labels(names.router)}}},
                  {"template", {{"metadata", {{"labels", labels}}}, {"spec", pod}}}}}};
}

Object router_service(const NodeSpec& spec, const ObjectNames& names,
                      const RenderOptions& options) {
  int port = spec.listen_port > 0 ? spec.listen_port : kEnginePort;
  Object service_port = {
      {"name", "http"}, {"port", port}, {"targetPort", "http"}, {"protocol", "TCP"}};
  return Object{
      {"apiVersion", "v1"},
      {"kind", "Service"},
      {"metadata", object_metadata(names.router, options.namespace_name,
                                   object_labels(names.router, names.router, "router"))},
      {"spec",
       {{"selector", selector_labels(names.router)}, {"ports", Object::array({service_port})}}}};
}

Object kai_queue(const RenderOptions& options) {
  // Nothing guaranteed, no limit: the queue borrows what the cluster has free (KAI's defaults).
  Object share = {{"quota", 0}, {"limit", -1}, {"overQuotaWeight", 1}};
  return Object{{"apiVersion", "scheduling.run.ai/v2"},
                {"kind", "Queue"},
                {"metadata", object_metadata(options.queue, "",
                                             object_labels(options.queue, options.queue, "queue"))},
                {"spec", {{"resources", {{"cpu", share}, {"gpu", share}, {"memory", share}}}}}};
}

}  // namespace

std::vector<Manifest> render_manifests(const NodeSpec& spec, const RenderOptions& options) {
  refuse_node_only_fields(spec);
  ObjectNames names = object_names(spec);
  std::vector<Manifest> manifests;
  manifests.push_back({"namespace.yaml", Object{{"apiVersion", "v1"},
                                                {"kind", "Namespace"},
                                                {"metadata", {{"name", options.namespace_name}}}}});
  manifests.push_back({"queue.yaml", kai_queue(options)});
  manifests.push_back({"agent-daemonset.yaml", agent_daemonset(options)});
  for (size_t i = 0; i < spec.models.size(); ++i) {
    ModelObject model{i, names.models[i], names.router};
    manifests.push_back(
        {"model-" + model.name + "-deployment.yaml", model_deployment(spec, model, options)});
    manifests.push_back({"model-" + model.name + "-service.yaml", model_service(model, options)});
  }
  manifests.push_back({"router-deployment.yaml", router_deployment(spec, names, options)});
  manifests.push_back({"router-service.yaml", router_service(spec, names, options)});
  manifests.push_back({"networkpolicy.yaml", models_network_policy(names, options)});
  return manifests;
}

Object kustomization(const std::vector<Manifest>& manifests) {
  Object resources = Object::array();
  for (const Manifest& m : manifests) resources.push_back(m.file);
  return Object{{"apiVersion", "kustomize.config.k8s.io/v1beta1"},
                {"kind", "Kustomization"},
                {"resources", resources}};
}

std::string manifest_text(const Manifest& manifest, const RenderOptions& options) {
  std::string kind = manifest.object.value("kind", "");
  std::string what = kind == "Kustomization"
                         ? "the kustomize base"
                         : kind + " " + manifest.object.at("metadata").value("name", "");
  return std::string(kRenderedHeader) + " from " + options.spec_file + ": " + what +
         ". Edit the spec and render again.\n" + to_yaml(manifest.object);
}

}  // namespace gpufrac::k8s
