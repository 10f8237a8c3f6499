// Pieces every rendered object shares (manifests.h): labels, metadata, probes, host-path volumes,
// and how numbers are written into manifests and flags. Pure; thread-safe.
#pragma once

#include <string>

#include "k8s/yaml_writer.h"

namespace gpufrac::k8s {

// The pod selector of an object: gpufrac/object: <name>.
Object selector_labels(const std::string& object);
// selector_labels plus app.kubernetes.io/{name,instance,component}; `instance` is the node's name.
Object object_labels(const std::string& object, const std::string& instance,
                     const std::string& component);
// {name, namespace (unless empty), labels}.
Object object_metadata(const std::string& name, const std::string& namespace_name,
                       const Object& labels);

// An HTTP GET probe on the container port named "http" (or `port_name`).
Object http_probe(const std::string& path, int period_s, int failure_threshold,
                  const std::string& port_name = "http");
// A hostPath volume of type DirectoryOrCreate.
Object host_path_volume(const std::string& name, const std::string& path);
// Pods may land on GPU nodes tainted nvidia.com/gpu:NoSchedule (the GPU Operator's convention).
Object gpu_node_tolerations();

// 600 -> "600s", 2.5 -> "2.5s" (what parse_seconds reads back).
std::string seconds_flag(double seconds);
// A share as KAI and the annotations take it: 0.5 -> "0.5", 1/3 -> "0.333333".
std::string share_text(double share);
// Whole seconds, rounded up.
int whole_seconds(double seconds);

}  // namespace gpufrac::k8s
