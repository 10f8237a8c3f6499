// `gpufrac k8s render`'s objects: a node spec (the one `gpufrac up` reads) as a kustomize base for
// a Kubernetes cluster scheduled by KAI-Scheduler. Per model a Deployment (replicas from the spec)
// and a Service; the router (`gpufrac k8s router`, routing by "model" to the models' Services) as a
// Deployment and a Service; the node agent as a DaemonSet; a KAI Queue; the Namespace; a
// NetworkPolicy letting only the router reach the model pods, and the router's keys from a Secret
// (access_manifest.h). Nothing in it talks to the Kubernetes API, so there is no RBAC: every pod
// runs without a service account token. docs/kubernetes.md explains every field.
//
// A model pod of `mode: fractions` asks KAI for its memory — annotation gpu-fraction "<share>"
// when the spec gives fraction.memory as a share, gpu-memory "<MiB>" when it gives bytes — and
// carries its compute share as gpufrac/sm-share; the downward API passes both to
// `gpufrac k8s exec`, its entrypoint, which sets the MPS limits and the memcap shim and fails
// closed. `timeslice`: the memory annotation only (the shim caps it, no MPS). `dedicated`: a whole
// GPU (nvidia.com/gpu: 1). What a cluster cannot honour is refused with one line: device: cpu,
// per-GPU modes, a memory share of 1 (KAI fractions are below 1). Spec errors are the ones
// `gpufrac up` gives. Pure and deterministic (same spec and options, same objects); thread-safe.
#pragma once

#include <string>
#include <vector>

#include "k8s/agent_layout.h"
#include "k8s/yaml_writer.h"
#include "node/node_spec.h"

namespace gpufrac::k8s {

struct RenderOptions {
  std::string image = "gpufrac:latest";  // holds gpufrac, libgpufrac_memcap.so and the engines
  std::string namespace_name = "gpufrac";
  std::string queue = "gpufrac";  // the KAI leaf queue the model pods go to
  std::string agent_root = kDefaultAgentRoot;
  std::string spec_file;  // named in each file's header comment
};

struct Manifest {
  std::string file;  // "model-demo-a-deployment.yaml"
  Object object;
};

// Every object of the base, in the order kustomization.yaml lists them.
std::vector<Manifest> render_manifests(const NodeSpec& spec, const RenderOptions& options);

// kustomization.yaml for them.
Object kustomization(const std::vector<Manifest>& manifests);

// The first line of every file render writes (render removes stale files that start with it).
inline constexpr const char* kRenderedHeader = "# Rendered by `gpufrac k8s render`";

// A file's text: the header comment, then the object as YAML.
std::string manifest_text(const Manifest& manifest, const RenderOptions& options);

}  // namespace gpufrac::k8s
