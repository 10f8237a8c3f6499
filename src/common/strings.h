// Small string helpers shared by every command: splitting, trimming, and parsing of the number
// formats users type (integer lists "1,2,4", byte sizes "19968M", "10G", "1.5GiB", durations "30s").
// Parsers throw UsageError naming `what` (the flag or field) when the text does not parse.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpufrac {

std::vector<std::string> split(std::string_view text, char sep);
std::string_view trim(std::string_view text);
bool starts_with(std::string_view text, std::string_view prefix);

int64_t parse_int(std::string_view text, std::string_view what);
double parse_double(std::string_view text, std::string_view what);
std::vector<int> parse_int_list(std::string_view text, std::string_view what);
std::vector<double> parse_double_list(std::string_view text, std::string_view what);

// Bytes: plain integer, or a number with K/M/G/T (powers of 1024; "KiB"/"MiB"/... and "KB"/"GB"
// are read the same way, as the CUDA MPS limits do). "10G" == 10 * 2^30.
uint64_t parse_bytes(std::string_view text, std::string_view what);
// 1536 -> "1.5 KiB"; exact enough for tables and messages.
std::string format_bytes(uint64_t bytes);
// Ascending integers with runs collapsed: {1, 2, 3, 4, 8} -> "1-4,8"; {} -> "".
std::string format_int_ranges(const std::vector<int>& ascending);
// Seconds: plain number, or with a unit suffix ms/s/m/h. "250ms" -> 0.25.
double parse_seconds(std::string_view text, std::string_view what);

}  // namespace gpufrac
