#include "common/strings.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "common/error.h"

namespace gpufrac {
namespace {

[[noreturn]] void bad_value(std::string_view what, std::string_view text, std::string_view want) {
  throw UsageError(std::string(what) + ": '" + std::string(text) + "' is not " + std::string(want));
}

// Splits "12.5GiB" into 12.5 and "GiB".
std::pair<double, std::string> number_and_suffix(std::string_view text, std::string_view what,
                                                 std::string_view want) {
  text = trim(text);
  size_t end = 0;
  while (end < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.')) {
    ++end;
  }
  if (end == 0) bad_value(what, text, want);
  double number = parse_double(text.substr(0, end), what);
  std::string suffix;
  for (char c : trim(text.substr(end))) suffix += char(std::tolower(static_cast<unsigned char>(c)));
  return {number, suffix};
}

}  // namespace

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t pos = text.find(sep, start);
    parts.emplace_back(text.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

int64_t parse_int(std::string_view text, std::string_view what) {
  std::string_view t = trim(text);
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (ec != std::errc() || ptr != t.data() + t.size() || t.empty()) {
    bad_value(what, text, "an integer");
  }
  return value;
}

double parse_double(std::string_view text, std::string_view what) {
  std::string t(trim(text));
  if (t.empty()) bad_value(what, text, "a number");
  char* end = nullptr;
  double value = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(value)) bad_value(what, text, "a number");
  return value;
}

std::vector<int> parse_int_list(std::string_view text, std::string_view what) {
  std::vector<int> values;
  for (const std::string& part : split(text, ',')) {
    values.push_back(int(parse_int(part, what)));
  }
  return values;
}

std::vector<double> parse_double_list(std::string_view text, std::string_view what) {
  std::vector<double> values;
  for (const std::string& part : split(text, ',')) values.push_back(parse_double(part, what));
  return values;
}

uint64_t parse_bytes(std::string_view text, std::string_view what) {
  constexpr std::string_view kWant = "a size in bytes (e.g. 1073741824, 512M, 10G, 1.5GiB)";
  auto [number, suffix] = number_and_suffix(text, what, kWant);
  if (!suffix.empty() && suffix.back() == 'b') suffix.pop_back();  // "gb", "gib" -> "g", "gi"
  if (!suffix.empty() && suffix.back() == 'i') suffix.pop_back();
  double scale = 1;
  if (suffix == "k") scale = 1024.0;
  else if (suffix == "m") scale = 1024.0 * 1024;
  else if (suffix == "g") scale = 1024.0 * 1024 * 1024;
  else if (suffix == "t") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!suffix.empty()) bad_value(what, text, kWant);
  return uint64_t(std::llround(number * scale));
}

std::string format_bytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = double(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, unit == 0 ? "%.0f %s" : "%.3g %s", value, kUnits[unit]);
  return buffer;
}

std::string format_int_ranges(const std::vector<int>& ascending) {
  std::string text;
  for (size_t i = 0; i < ascending.size();) {
    size_t end = i;  // the run ascending[i..end] counts up by one
    while (end + 1 < ascending.size() && ascending[end + 1] == ascending[end] + 1) ++end;
    if (!text.empty()) text += ',';
    text += std::to_string(ascending[i]);
    if (end > i) text += '-' + std::to_string(ascending[end]);
    i = end + 1;
  }
  return text;
}

double parse_seconds(std::string_view text, std::string_view what) {
  constexpr std::string_view kWant = "a duration (e.g. 30, 30s, 250ms, 5m)";
  auto [number, suffix] = number_and_suffix(text, what, kWant);
  if (suffix.empty() || suffix == "s") return number;
  if (suffix == "ms") return number / 1000;
  if (suffix == "m") return number * 60;
  if (suffix == "h") return number * 3600;
  bad_value(what, text, kWant);
}

}  // namespace gpufrac
