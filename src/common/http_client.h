// A blocking HTTP/1.1 client for control-plane calls: health checks, /v1/models, status, tests.
// One request per connection ("Connection: close"), a deadline for the whole exchange (the URL's
// host is resolved within it, but a slow name lookup is not cut short). It drives common's
// HttpClientConnection with poll() (http_client_connection.h); bench's load generator and the
// router's proxy drive the same core from their own epoll loops.
//
// Thread-safe (no shared state). Failures (refused, timeout, malformed reply) come back as
// status 0 with `error` set; never throws for network errors.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/http_url.h"

namespace gpufrac {

struct HttpReply {
  int status = 0;  // 0: no HTTP reply (see error)
  std::string body;
  std::string content_type;
  std::string error;
  bool ok() const { return status >= 200 && status < 300; }
};

// `headers`: extra header lines without CRLF ("Authorization: Bearer KEY").
HttpReply http_request(std::string_view method, std::string_view url, std::string_view body = {},
                       double timeout_s = 10, std::string_view content_type = "application/json",
                       const std::vector<std::string>& headers = {});
inline HttpReply http_get(std::string_view url, double timeout_s = 10,
                          const std::vector<std::string>& headers = {}) {
  return http_request("GET", url, {}, timeout_s, "application/json", headers);
}
inline HttpReply http_post_json(std::string_view url, std::string_view body, double timeout_s = 10) {
  return http_request("POST", url, body, timeout_s);
}

}  // namespace gpufrac
