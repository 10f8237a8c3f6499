// Helpers shared by the node tests: temporary run directories, the paths of the fakes, polling.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

namespace gpufrac::testing {

inline std::string source_dir() {
  const char* dir = std::getenv("GPUFRAC_SOURCE_DIR");
  return dir ? dir : ".";
}
inline std::string fake_path(const std::string& name) { return source_dir() + "/tests/fakes/" + name; }
// Built fakes sit beside the test binary (tests/node/).
inline std::string built_fake(const std::string& name) {
  return std::filesystem::canonical("/proc/self/exe").parent_path().string() + "/" + name;
}

// A fresh directory under /tmp (short, so MPS pipe paths fit), removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/gfn-XXXXXX";
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
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// Polls `condition` every 20 ms for up to `timeout_s`.
inline bool eventually(const std::function<bool()>& condition, double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

}  // namespace gpufrac::testing

namespace gpufrac::testing {

// The fake engine: bench's scripted SSE server (tests/fakes), which serves /v1/models (used as
// the health path) and streams `max_tokens` tokens `itl_ms` apart.
inline std::string fake_engine_command(int ttft_ms = 10, int itl_ms = 5) {
  return std::string(SCRIPTED_SSE_SERVER) + " --port {port} --model {name} --ttft-ms " +
         std::to_string(ttft_ms) + " --itl-ms " + std::to_string(itl_ms);
}

// A model entry of a node spec running the fake engine.
inline std::string fake_model(const std::string& name, const std::string& fraction,
                              const std::string& command_prefix = "", int itl_ms = 5) {
  return "  - name: " + name + "\n    command: " + command_prefix + fake_engine_command(10, itl_ms) +
         "\n    health: /v1/models\n    startup_timeout: 20s\n    fraction: " + fraction + "\n";
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
