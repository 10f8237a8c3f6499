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

