#include "k8s/access_manifest.h"

#include <cstdio>

#include "common/error.h"
#include "k8s/agent_layout.h"
#include "k8s/manifest_parts.h"

namespace gpufrac::k8s {

std::string api_keys_secret_name(const ObjectNames& names) {
  return names.router + "-api-keys";
}

void refuse_keys_in_files(const NodeSpec& spec) {
  for (size_t i = 0; i < spec.models.size(); ++i) {
    const ModelSpec& m = spec.models[i];
    std::string field = spec.source + ": models[" + std::to_string(i) + "].";
    if (!m.api_keys.empty()) {
      throw UsageError(field + "api_keys: keys written in the spec would be written into the " +
                       "rendered manifests; give api_keys_env: VAR instead and put the keys in " +
                       "the Secret the router reads it from (docs/kubernetes.md, \"API keys\")");
    }
    if (!m.api_keys_file.empty()) {
      throw UsageError(field + "api_keys_file: the file is on this machine, not in the cluster; " +
                       "give api_keys_env: VAR instead and put the keys in the Secret the router " +
                       "reads it from (docs/kubernetes.md, \"API keys\")");
    }
  }
}

Object models_network_policy(const ObjectNames& names, const RenderOptions& options) {
  std::string name = names.router + "-models";
  Object models = {{"app.kubernetes.io/instance", names.router},
                   {"app.kubernetes.io/component", "model"}};
  Object from_router = {{"podSelector", {{"matchLabels", selector_labels(names.router)}}}};
  Object port = {{"protocol", "TCP"}, {"port", kEnginePort}};
  return Object{{"apiVersion", "networking.k8s.io/v1"},
                {"kind", "NetworkPolicy"},
                {"metadata", object_metadata(name, options.namespace_name,
                                             object_labels(name, names.router, "network-policy"))},
                {"spec",
                 {{"podSelector", {{"matchLabels", models}}},
                  {"policyTypes", Object::array({"Ingress"})},
                  {"ingress", Object::array({Object{{"from", Object::array({from_router})},
                                                    {"ports", Object::array({port})}}})}}}};
}

RouterAccess router_access(const NodeSpec& spec) {
  ObjectNames names = object_names(spec);
  RouterAccess access;
  for (const ModelSpec& m : spec.models) {
    if (!m.api_keys_env.empty()) {
      access.flags.insert(access.flags.end(), {"--api-keys-env", m.name + "=" + m.api_keys_env});
      bool listed = false;
      for (const Object& entry : access.env) listed |= entry["name"] == m.api_keys_env;
      if (!listed) {
        access.env.push_back(
            {{"name", m.api_keys_env},
             {"valueFrom",
              {{"secretKeyRef",
                {{"name", api_keys_secret_name(names)}, {"key", m.api_keys_env}}}}}});
      }
    }
    if (m.max_requests_in_flight > 0) {
      access.flags.insert(
          access.flags.end(),
          {"--max-requests-in-flight", m.name + "=" + std::to_string(m.max_requests_in_flight)});
    }
    if (m.requests_per_second > 0) {
      char rate[32];
      std::snprintf(rate, sizeof rate, "%g", m.requests_per_second);
      access.flags.insert(access.flags.end(), {"--requests-per-second", m.name + "=" + rate});
    }
  }
  return access;
}

}  // namespace gpufrac::k8s
