// Helpers shared by the k8s tests (beside the node tests' temporary directories, files and
// polling): the source tree (compiled in by CMake, since a test binary run by hand has no ctest
// environment), running a command, and rendered YAML read back as JSON.
#pragma once

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/json.h"
#include "node/node_test_util.h"  // TempDir, read_file, write_file, eventually

namespace gpufrac::testing {

// The source tree: GPUFRAC_SOURCE_DIR under ctest, else the path CMake compiled in.
inline std::string source_tree() {
  const char* from_env = std::getenv("GPUFRAC_SOURCE_DIR");
  return from_env && *from_env ? from_env : GPUFRAC_SOURCE_DIR_AT_BUILD;
}

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};
// Runs a shell command line and captures its output.
inline CommandResult run_shell(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// YAML as Kubernetes reads it: quoted scalars are strings; plain ones are null, booleans,
// integers or floats when they look like one (YAML 1.2's core schema), else strings.
inline Json yaml_to_json(const YAML::Node& node) {
  if (node.IsMap()) {
    Json out = Json::object();
    for (const auto& entry : node) out[entry.first.Scalar()] = yaml_to_json(entry.second);
    return out;
  }
  if (node.IsSequence()) {
    Json out = Json::array();
    for (const auto& item : node) out.push_back(yaml_to_json(item));
    return out;
  }
  if (node.IsNull()) return nullptr;
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted
  if (text == "true" || text == "false") return text == "true";
  if (text == "null" || text == "~") return nullptr;
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-' ||
                        text[0] == '+' || text[0] == '.')) {
    return text;
  }
  char* end = nullptr;
  long long integer = std::strtoll(text.c_str(), &end, 10);
  if (!text.empty() && *end == '\0') return integer;
  double number = std::strtod(text.c_str(), &end);
  if (!text.empty() && *end == '\0') return number;
  return text;
}

}  // namespace gpufrac::testing
