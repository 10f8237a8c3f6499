#include "k8s/manifest_parts.h"

#include <cmath>
#include <cstdio>

namespace gpufrac::k8s {

Object selector_labels(const std::string& object) {
  return Object{{"gpufrac/object", object}};
}

Object object_labels(const std::string& object, const std::string& instance,
                     const std::string& component) {
  Object labels = {{"app.kubernetes.io/name", "gpufrac"},
                   {"app.kubernetes.io/instance", instance},
                   {"app.kubernetes.io/component", component}};
  labels.update(selector_labels(object));
  return labels;
}

Object object_metadata(const std::string& name, const std::string& namespace_name,
                       const Object& labels) {
  Object metadata = {{"name", name}};
  if (!namespace_name.empty()) metadata["namespace"] = namespace_name;
  metadata["labels"] = labels;
  return metadata;
}

Object http_probe(const std::string& path, int period_s, int failure_threshold,
                  const std::string& port_name) {
  return Object{{"httpGet", {{"path", path}, {"port", port_name}}},
                {"periodSeconds", period_s},
                {"failureThreshold", failure_threshold}};
}

Object host_path_volume(const std::string& name, const std::string& path) {
  return Object{{"name", name}, {"hostPath", {{"path", path}, {"type", "DirectoryOrCreate"}}}};
}

Object gpu_node_tolerations() {
  Object toleration = {{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}};
  return Object::array({toleration});
}

std::string seconds_flag(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%gs", seconds);
  return text;
}

std::string share_text(double share) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", share);
  return text;
}

int whole_seconds(double seconds) {
  return int(std::ceil(seconds));
}

}  // namespace gpufrac::k8s
