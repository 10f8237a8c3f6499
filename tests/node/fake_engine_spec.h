// Node specs whose models are fake engines (bench's scripted SSE server, whose path the test's
// CMake target passes as SCRIPTED_SSE_SERVER), and /proc readers for what a model process got.
#pragma once

#include <sstream>
#include <string>

#include "node_test_util.h"

namespace gpufrac::testing {

// The fake engine: bench's scripted SSE server (tests/fakes), which serves /v1/models (used as
// the health path) and streams `max_tokens` tokens `itl_ms` apart.
inline std::string fake_engine_command(int ttft_ms = 10, int itl_ms = 5) {
  return std::string(SCRIPTED_SSE_SERVER) + " --port {port} --model {name} --ttft-ms " +
         std::to_string(ttft_ms) + " --itl-ms " + std::to_string(itl_ms);
}

// A model entry of a node spec running the fake engine.
inline std::string fake_model(const std::string& name, const std::string& fraction,
                              const std::string& command_prefix = "", int itl_ms = 5,
                              const std::string& startup_timeout = "20s") {
  return "  - name: " + name + "\n    command: " + command_prefix + fake_engine_command(10, itl_ms) +
         "\n    health: /v1/models\n    startup_timeout: " + startup_timeout +
         "\n    fraction: " + fraction + "\n";
}

inline std::string proc_status_field(pid_t pid, const std::string& field) {
  std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) {
      std::string value = line.substr(field.size() + 1);
      return value.substr(value.find_first_not_of(" \t"));
    }
  }
  return "";
}

inline std::string proc_env(pid_t pid, const std::string& name) {
  std::string environ = read_file("/proc/" + std::to_string(pid) + "/environ");
  std::string want = name + "=";
  size_t start = 0;
  while (start < environ.size()) {
    size_t end = environ.find('\0', start);
    std::string entry = environ.substr(start, end - start);
    if (entry.rfind(want, 0) == 0) return entry.substr(want.size());
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return "<unset>";
}

}  // namespace gpufrac::testing
