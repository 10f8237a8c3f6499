// Test helpers for the engine's HTTP server: the raw-socket exchanges of
// common/raw_http_exchange.h, plus splitting an SSE body into its `data:` payloads and reading
// one /metrics value.
#pragma once

#include <string>
#include <vector>

#include "common/http_client.h"
#include "common/raw_http_exchange.h"
#include "common/strings.h"

namespace gpufrac::testing {

// The payloads of an SSE body's "data: ..." events, in order.
inline std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> events;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    std::string event = body.substr(pos, end - pos);
    if (event.rfind("data: ", 0) == 0) events.push_back(event.substr(6));
    pos = end + 2;
  }
  return events;
}

// The value of the first sample line of `name` (exact name, then '{' or ' ') in Prometheus text;
// -1 when absent.
inline double metric_value(const std::string& text, const std::string& name) {
  for (const std::string& line : split(text, '\n')) {
    if (line.rfind(name, 0) != 0 || line.size() <= name.size()) continue;
    char next = line[name.size()];
    if (next != '{' && next != ' ') continue;
    return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

inline double scrape(int port, const std::string& name) {
  HttpReply r = http_get("http://127.0.0.1:" + std::to_string(port) + "/metrics");
  return r.ok() ? metric_value(r.body, name) : -1;
}

}  // namespace gpufrac::testing
