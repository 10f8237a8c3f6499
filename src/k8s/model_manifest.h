// One model of a node spec as a KAI-scheduled Deployment and its Service (manifests.h has the
// rules). The container runs `gpufrac k8s exec [--mode M] ... -- <engine>`: the built-in engine's
// `gpufrac serve --host 0.0.0.0 --port 8000 ...`, or the spec's command with {port} and {name}
// filled and {gpu}, {gpu_uuid}, {memory_bytes}, {gpu_memory_utilization} left for exec, which
// knows them only at start. Pure; thread-safe.
#pragma once

#include <string>

#include "k8s/manifests.h"

namespace gpufrac::k8s {

struct ModelObject {
  size_t index = 0;      // into spec.models
  std::string name;      // its Deployment's and Service's name
  std::string instance;  // the node's object name (app.kubernetes.io/instance)
};

// Throws UsageError naming the model's field when the cluster cannot honour it.
Object model_deployment(const NodeSpec& spec, const ModelObject& model,
                        const RenderOptions& options);
Object model_service(const ModelObject& model, const RenderOptions& options);

// The container command (exposed for the tests and the docs' examples).
std::vector<std::string> model_container_command(const NodeSpec& spec, const ModelObject& model,
                                                 const RenderOptions& options);

}  // namespace gpufrac::k8s
