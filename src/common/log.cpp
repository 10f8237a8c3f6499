#include "common/log.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace gpufrac {
namespace {

LogLevel level_from_env() {
  const char* env = std::getenv("GPUFRAC_LOG");
  std::string_view v = env ? env : "info";
  if (v == "debug") return LogLevel::kDebug;
  if (v == "warn") return LogLevel::kWarn;
  if (v == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
  }
  return "?";
}

}  // namespace

bool log_enabled(LogLevel level) {
  static const LogLevel threshold = level_from_env();
  return level >= threshold;
}

void log_line(LogLevel level, std::string_view text) {
  std::string line = "[gpufrac ";
  line += level_name(level);
  line += "] ";
  line += text;
  line += '\n';
  // One write() per line keeps lines whole when threads or processes share stderr.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace gpufrac
