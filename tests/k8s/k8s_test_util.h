// Helpers shared by the k8s tests: the source tree and the gpufrac binary (compiled in by CMake,
// since a test binary run by hand has no ctest environment), temporary directories, files,
// running a command, and rendered YAML read back as JSON.
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

namespace gpufrac::testing {

inline std::string source_dir() {
  const char* from_env = std::getenv("GPUFRAC_SOURCE_DIR");
  return from_env && *from_env ? from_env : GPUFRAC_SOURCE_DIR_AT_BUILD;
}

// A fresh directory under /tmp (short, so MPS pipe paths fit), removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/gfk-XXXXXX";
    path_ = ::mkdtemp(pattern);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
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
