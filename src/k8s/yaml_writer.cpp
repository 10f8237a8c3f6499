#include "k8s/yaml_writer.h"

#include <algorithm>
#include <cctype>

namespace gpufrac::k8s {
namespace {

bool reserved_word(std::string lower) {
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  for (const char* word : {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"}) {
    if (lower == word) return true;
  }
  return false;
}

std::string scalar(const Object& value) {
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    return plain_yaml_string(text) ? text : Object(text).dump();
  }
  return value.dump();  // numbers, booleans, null: JSON's spelling is YAML's
}

bool collection(const Object& value) {
  return (value.is_object() || value.is_array()) && !value.empty();
}

void write(const Object& value, int indent, std::string& out);

// A value after "key:" or "- ": on the same line when it is a scalar or empty, else below.
void write_after_indicator(const Object& value, int indent, bool in_list, std::string& out) {
  if (!collection(value)) {
    out += " " + scalar(value) + "\n";
  } else if (value.is_object() && in_list) {
    // "- key: value" keeps the first key on the dash's line.
    std::string nested;
    write(value, indent, nested);
    out += " " + nested.substr(size_t(indent));
  } else {
    out += "\n";
    write(value, indent, out);
  }
}

void write(const Object& value, int indent, std::string& out) {
  std::string pad(size_t(indent), ' ');
  if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      out += pad + scalar(Object(key)) + ":";
      write_after_indicator(item, indent + 2, false, out);
    }
  } else if (value.is_array()) {
    for (const Object& item : value) {
      out += pad + "-";
      write_after_indicator(item, indent + 2, true, out);
    }
  } else {
    out += pad + scalar(value) + "\n";
  }
}

}  // namespace

bool plain_yaml_string(const std::string& text) {
  if (text.empty() || reserved_word(text)) return false;
  unsigned char first = static_cast<unsigned char>(text[0]);
  if (!(std::isalpha(first) || first == '/' || first == '_')) return false;
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (!(std::isalnum(u) || c == '/' || c == '.' || c == '_' || c == '-' || c == '=' || c == ':' ||
          c == '@' || c == '+')) {
      return false;
    }
  }
  return text.back() != ':';
}

std::string to_yaml(const Object& value) {
  std::string out;
  if (collection(value)) {
    write(value, 0, out);
  } else {
    out = scalar(value) + "\n";
  }
  return out;
}

}  // namespace gpufrac::k8s
