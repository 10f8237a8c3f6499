#include "common/yaml_reader.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "common/strings.h"

namespace gpufrac {

YAML::Node YamlReader::load(const std::string& yaml_text) const {
  try {
    return YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw UsageError(source_ + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML (" +
                     e.msg + ")");
  }
}

void YamlReader::fail(const YAML::Node& node, const std::string& field,
                      const std::string& problem) const {
  std::string where = source_;
  if (node.IsDefined() && node.Mark().line >= 0)
    where += ":" + std::to_string(node.Mark().line + 1);
  throw UsageError(where + ": " + field + ": " + problem);
}

void YamlReader::check_keys(const YAML::Node& map, const std::string& field,
                            const std::vector<std::string>& allowed) const {
  if (!map.IsMap())
    fail(map, field.empty() ? "the spec" : field, "must be a mapping of fields (key: value)");
  std::set<std::string> seen;
  for (const auto& entry : map) {
    std::string key = entry.first.Scalar();
    // yaml-cpp keeps the first of two equal keys silently; a spec saying `mode:` twice is a
    // mistake.
    if (!seen.insert(key).second) fail(entry.first, join(field, key), "is given twice; keep one");
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string list;
    for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
    fail(entry.first, join(field, key), "unknown field; use one of: " + list);
  }
}

std::string YamlReader::scalar(const YAML::Node& node, const std::string& field) const {
  if (!node.IsScalar()) fail(node, field, "must be a single value, not a list or mapping");
  return node.Scalar();
}

std::string YamlReader::text(const YAML::Node& node, const std::string& field) const {
  std::string value = scalar(node, field);
  if (trim(value).empty()) fail(node, field, "is empty; give a value");
  return value;
}

bool YamlReader::boolean(const YAML::Node& node, const std::string& field) const {
  std::string v = scalar(node, field);
  if (v == "true" || v == "yes" || v == "on") return true;
  if (v == "false" || v == "no" || v == "off") return false;
  fail(node, field, "'" + v + "' is not true or false");
}

int64_t YamlReader::integer(const YAML::Node& node, const std::string& field, int64_t min,
                            int64_t max) const {
  int64_t value = parsed(node, field, [&](const std::string& v) { return parse_int(v, field); });
  if (value < min || value > max) {
    fail(node, field,
         std::to_string(value) + " is out of range; use " + std::to_string(min) + " to " +
             std::to_string(max));
  }
  return value;
}

double YamlReader::number(const YAML::Node& node, const std::string& field, double min,
                          double max) const {
  double value = parsed(node, field, [&](const std::string& v) { return parse_double(v, field); });
  if (value < min || value > max) {
    fail(node, field,
         scalar(node, field) + " is out of range; use a number from " + std::to_string(min) +
             " to " + std::to_string(max));
  }
  return value;
}

double YamlReader::share(const YAML::Node& node, const std::string& field) const {
  std::string raw = scalar(node, field);
  std::string value(trim(raw));
  bool percent = !value.empty() && value.back() == '%';
  if (percent) value.pop_back();
  double share = -1;
  try {
    share = parse_double(value, field);
  } catch (const UsageError&) {
  }
  if (percent) share /= 100;
  if (!(share > 0) || share > 1 + 1e-9) {
    fail(node, field,
         "'" + raw + "' is not a share of the GPU; use a number in (0, 1] like 0.5, or 50%");
  }
  return std::min(share, 1.0);
}

std::vector<int64_t> YamlReader::integers(const YAML::Node& node, const std::string& field,
                                          int64_t min, int64_t max) const {
  if (node.IsScalar()) return {integer(node, field, min, max)};
  if (!node.IsSequence() || node.size() == 0) {
    fail(node, field, "must be a number or a non-empty list of numbers, e.g. [1, 2, 4]");
  }
  std::vector<int64_t> values;
  for (size_t i = 0; i < node.size(); ++i)
    values.push_back(integer(node[i], index(field, i), min, max));
  return values;
}

std::vector<double> YamlReader::numbers(const YAML::Node& node, const std::string& field,
                                        double min, double max) const {
  if (node.IsScalar()) return {number(node, field, min, max)};
  if (!node.IsSequence() || node.size() == 0) {
    fail(node, field, "must be a number or a non-empty list of numbers, e.g. [0.1, 0.5]");
  }
  std::vector<double> values;
  for (size_t i = 0; i < node.size(); ++i)
    values.push_back(number(node[i], index(field, i), min, max));
  return values;
}

std::string YamlReader::choice(const YAML::Node& node, const std::string& field,
                               const std::vector<std::string>& choices) const {
  std::string v = scalar(node, field);
  if (std::find(choices.begin(), choices.end(), v) != choices.end()) return v;
  std::string list;
  for (const std::string& c : choices) list += (list.empty() ? "" : " | ") + c;
  fail(node, field, "'" + v + "' is not one of " + list);
}

std::string YamlReader::strip_field(const std::string& message, const std::string& field) {
  return starts_with(message, field + ": ") ? message.substr(field.size() + 2) : message;
}

}  // namespace gpufrac
