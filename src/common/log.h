// Logging to stderr: one line per message, "[gpufrac LEVEL] text". Thread-safe (one write per
// line). Level from GPUFRAC_LOG=debug|info|warn|error (default info). Arguments are streamed:
// log_info("placed ", n, " models").
#pragma once

#include <sstream>
#include <string_view>

namespace gpufrac {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

bool log_enabled(LogLevel level);
void log_line(LogLevel level, std::string_view text);

template <typename... Args>
void log_at(LogLevel level, const Args&... args) {
  if (!log_enabled(level)) return;
  std::ostringstream line;
  (line << ... << args);
  log_line(level, line.str());
}

template <typename... Args>
void log_debug(const Args&... args) { log_at(LogLevel::kDebug, args...); }
template <typename... Args>
void log_info(const Args&... args) { log_at(LogLevel::kInfo, args...); }
template <typename... Args>
void log_warn(const Args&... args) { log_at(LogLevel::kWarn, args...); }
template <typename... Args>
void log_error(const Args&... args) { log_at(LogLevel::kError, args...); }

}  // namespace gpufrac
