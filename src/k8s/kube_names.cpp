#include "k8s/kube_names.h"

#include <cctype>

#include "common/error.h"

namespace gpufrac::k8s {
namespace {

std::string trim_dashes(std::string text) {
  while (!text.empty() && text.back() == '-') text.pop_back();
  size_t first = text.find_first_not_of('-');
  return first == std::string::npos ? "" : text.substr(first);
}

}  // namespace

std::string kube_label(const std::string& name) {
  std::string out;
  for (char c : name) {
    unsigned char u = static_cast<unsigned char>(c);
    char mapped = std::isalnum(u) ? char(std::tolower(u)) : '-';
    if (mapped == '-' && (out.empty() || out.back() == '-')) continue;
    out += mapped;
  }
  out = trim_dashes(out);
  if (out.empty()) out = "m";
  if (std::isdigit(static_cast<unsigned char>(out[0]))) out = "m" + out;
  if (out.size() > kMaxLabelLength) out = trim_dashes(out.substr(0, kMaxLabelLength));
  return out;
}

ObjectNames object_names(const NodeSpec& spec) {
  ObjectNames names;
  names.router = kube_label(spec.name);
  for (size_t i = 0; i < spec.models.size(); ++i) {
    std::string name = kube_label(names.router + "-" + spec.models[i].name);
    if (name == names.router) {
      throw UsageError(spec.source + ": name: '" + spec.name +
                       "' is too long to tell its models' " +
                       "Kubernetes names from the router's; use a shorter name");
    }
    for (size_t j = 0; j < i; ++j) {
      if (names.models[j] != name) continue;
      throw UsageError(spec.source + ": models[" + std::to_string(i) + "].name: '" +
                       spec.models[i].name + "' and models[" + std::to_string(j) + "].name '" +
                       spec.models[j].name + "' both become the Kubernetes name '" + name +
                       "'; rename one of them");
    }
    names.models.push_back(name);
  }
  return names;
}

}  // namespace gpufrac::k8s
