// Writes Kubernetes manifests as YAML: a JSON value (nlohmann ordered_json, so keys keep the order
// they were built in) as block YAML, two-space indents, lists under their key. Strings are plain
// only where YAML cannot read them as anything else (no number, bool or null look-alikes, no
// indicator characters); every other string is double-quoted with JSON escapes, so an annotation
// "0.5" or a port name "8000" stays a string. Deterministic: the same value gives the same bytes.
// Pure; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace gpufrac::k8s {

using Object = nlohmann::ordered_json;

std::string to_yaml(const Object& value);

// True when `text` may be written as a plain YAML scalar and read back as the same string.
bool plain_yaml_string(const std::string& text);

}  // namespace gpufrac::k8s
