// Reading YAML specs (node specs, experiment specs) with one-line errors: every accessor takes the
// dotted field name ("models[1].fraction.compute") and throws UsageError
// "<source>:<line>: <field>: <problem>; <fix>" at the first mistake. yaml-cpp underneath (linked
// statically). Stateless apart from the source name; thread-safe.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "common/error.h"

namespace gpufrac {

class YamlReader {
 public:
  explicit YamlReader(std::string source) : source_(std::move(source)) {}
  const std::string& source() const { return source_; }

  // Parses a whole document; a syntax error names the line.
  YAML::Node load(const std::string& yaml_text) const;

  [[noreturn]] void fail(const YAML::Node& node, const std::string& field,
                         const std::string& problem) const;
  // `map` must be a mapping whose keys are all in `allowed`, each given once.
  void check_keys(const YAML::Node& map, const std::string& field,
                  const std::vector<std::string>& allowed) const;

  std::string scalar(const YAML::Node& node, const std::string& field) const;
  std::string text(const YAML::Node& node, const std::string& field) const;  // non-empty
  bool boolean(const YAML::Node& node, const std::string& field) const;
  int64_t integer(const YAML::Node& node, const std::string& field, int64_t min, int64_t max) const;
  double number(const YAML::Node& node, const std::string& field, double min, double max) const;
  // A share in (0, 1]: 0.5 or "50%".
  double share(const YAML::Node& node, const std::string& field) const;
  // A scalar or a list of scalars: `4` or `[1, 2, 4]`.
  std::vector<int64_t> integers(const YAML::Node& node, const std::string& field, int64_t min,
                                int64_t max) const;
  std::vector<double> numbers(const YAML::Node& node, const std::string& field, double min,
                              double max) const;
  // One of `choices`.
  std::string choice(const YAML::Node& node, const std::string& field,
                     const std::vector<std::string>& choices) const;

  // Runs parse(value) (a strings.h parser), turning its UsageError into this reader's format.
  template <typename F>
  auto parsed(const YAML::Node& node, const std::string& field, F parse) const {
    std::string value = scalar(node, field);
    try {
      return parse(value);
    } catch (const UsageError& e) {
      fail(node, field, strip_field(e.what(), field));
    }
  }

  static std::string join(const std::string& parent, const std::string& key) {
    return parent.empty() ? key : parent + "." + key;
  }
  static std::string index(const std::string& parent, size_t i) {
    return parent + "[" + std::to_string(i) + "]";
  }

 private:
  static std::string strip_field(const std::string& message, const std::string& field);
  std::string source_;
};

}  // namespace gpufrac
