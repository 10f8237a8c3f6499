// Who may reach and who may call a rendered node's models (docs/security.md):
//   - a NetworkPolicy "<node>-models" on the node's model pods: ingress only from the node's
//     router pods, on the engine port. In a cluster the engines listen on 0.0.0.0 for their
//     Service and take no key of their own, so the policy is what keeps every other pod off them
//     (kubelet probes come from the node itself, which CNIs let through).
//   - the router's part: for every model with api_keys_env: VAR, the router container gets VAR
//     from the Secret "<node>-api-keys" (the Secret's key named like the variable; the user
//     creates it, render never writes a key) and the flag --api-keys-env MODEL=VAR;
//     max_requests_in_flight and requests_per_second become --max-requests-in-flight MODEL=N and
//     --requests-per-second MODEL=R.
//   - keys written in the spec (api_keys) or in a file of this machine (api_keys_file) are
//     refused with one line: a rendered base holds no secret, and the file is not in the cluster.
// Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "k8s/kube_names.h"
#include "k8s/manifests.h"

namespace gpufrac::k8s {

std::string api_keys_secret_name(const ObjectNames& names);

// Throws UsageError for api_keys or api_keys_file (see above).
void refuse_keys_in_files(const NodeSpec& spec);

Object models_network_policy(const ObjectNames& names, const RenderOptions& options);

struct RouterAccess {
  std::vector<std::string> flags;  // appended to `gpufrac k8s router`'s command
  Object env = Object::array();    // the container's env entries (from the Secret)
};
RouterAccess router_access(const NodeSpec& spec);

}  // namespace gpufrac::k8s
