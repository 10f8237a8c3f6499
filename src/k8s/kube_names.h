// Kubernetes object names for a node spec's parts. Model names may hold '/', ':', '.', '_' and
// capitals ("Qwen/Qwen3-4B"); Service names must be DNS-1035 labels (lowercase letters, digits
// and '-', starting with a letter, at most 63 characters). kube_label() maps any name to one
// (lowercase, every other character a '-', runs of '-' folded, trimmed, 'm' in front of a leading
// digit); object_names() names every model "<node>-<model>" and the router "<node>", and throws
// UsageError naming both models' fields when two models map to one name. Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "node/node_spec.h"

namespace gpufrac::k8s {

inline constexpr size_t kMaxLabelLength = 63;

std::string kube_label(const std::string& name);

struct ObjectNames {
  std::string router;               // the router's Deployment and Service: "<node>"
  std::vector<std::string> models;  // per model, in spec order: "<node>-<model>"
};
ObjectNames object_names(const NodeSpec& spec);

}  // namespace gpufrac::k8s
