#include "k8s/agent_manifest.h"

#include "k8s/manifest_parts.h"

namespace gpufrac::k8s {

Object agent_daemonset(const RenderOptions& options) {
  Object labels = object_labels(kAgentName, kAgentName, "agent");
  Object container = {
      {"name", "agent"},
      {"image", options.image},
      {"command", std::vector<std::string>{"gpufrac", "k8s", "agent", "--root", options.agent_root,
                                           "--listen", "0.0.0.0:" + std::to_string(kAgentPort),
                                           "--client-uid", std::to_string(kPodUid)}},
      {"env", Object::array(
                  {Object{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}},
                   Object{{"name", "NVIDIA_DRIVER_CAPABILITIES"}, {"value", "compute,utility"}}})},
      {"ports", Object::array({Object{
                    {"name", "metrics"}, {"containerPort", kAgentPort}, {"protocol", "TCP"}}})},
      {"readinessProbe", http_probe("/ready", 5, 2, "metrics")},
      {"livenessProbe", http_probe("/healthz", 10, 3, "metrics")},
      {"resources", {{"requests", {{"cpu", "50m"}, {"memory", "64Mi"}}}}},
      {"securityContext", {{"privileged", true}}},
      {"volumeMounts",
       Object::array({Object{{"name", "gpufrac-agent"}, {"mountPath", options.agent_root}},
                      Object{{"name", "mps-shm"}, {"mountPath", "/dev/shm"}}})}};
  Object pod = {
      {"hostPID", true},
      {"runtimeClassName", "nvidia"},
      {"automountServiceAccountToken", false},
      {"nodeSelector", {{"nvidia.com/gpu.present", "true"}}},
      {"tolerations", gpu_node_tolerations()},
      {"terminationGracePeriodSeconds", 30},
      {"containers", Object::array({container})},
      {"volumes", Object::array({host_path_volume("gpufrac-agent", options.agent_root),
                                 host_path_volume("mps-shm", agent_shm_dir(options.agent_root))})}};
  Object annotations = {{"prometheus.io/scrape", "true"},
                        {"prometheus.io/port", std::to_string(kAgentPort)},
                        {"prometheus.io/path", "/metrics"}};
  return Object{
      {"apiVersion", "apps/v1"},
      {"kind", "DaemonSet"},
      {"metadata", object_metadata(kAgentName, options.namespace_name, labels)},
      {"spec",
       {{"selector", {{"matchLabels", selector_labels(kAgentName)}}},
        {"updateStrategy", {{"type", "OnDelete"}}},
        {"template",
         {{"metadata", {{"labels", labels}, {"annotations", annotations}}}, {"spec", pod}}}}}};
}

}  // namespace gpufrac::k8s
