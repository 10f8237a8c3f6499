// A blocking HTTP/1.1 client for control-plane calls: health checks, /v1/models, status, tests.
// One request per connection ("Connection: close"), a deadline for the whole exchange. Not for
// load generation (bench has its own event-driven client) or proxying (the router streams); both
// share its URL parsing and address resolution (parse_http_url, resolve_socket_address).
//
// Thread-safe (no shared state). Failures (refused, timeout, malformed reply) come back as
// status 0 with `error` set; never throws for network errors.
#pragma once

#include <sys/socket.h>

#include <string>
#include <string_view>
#include <vector>

namespace gpufrac {

struct HttpUrl {
  std::string host;  // "127.0.0.1", "localhost"
  int port = 80;
  std::string path;  // "/v1/completions" (with query), "/" when empty
};
// Parses "http://host:port/path"; throws UsageError naming `what` when it isn't one.
HttpUrl parse_http_url(std::string_view url, std::string_view what);

// Where a URL's host and port point for a TCP connection: getaddrinfo's first answer.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const sockaddr* as_sockaddr() const { return reinterpret_cast<const sockaddr*>(&storage); }
};
// False with `error` ("cannot resolve HOST: why") when the host does not resolve.
bool resolve_socket_address(const HttpUrl& url, SocketAddress& out, std::string& error);

struct HttpReply {
  int status = 0;  // 0: no HTTP reply (see error)
  std::string body;
  std::string content_type;
  std::string error;
  bool ok() const { return status >= 200 && status < 300; }
};

HttpReply http_request(std::string_view method, std::string_view url, std::string_view body = {},
                       double timeout_s = 10, std::string_view content_type = "application/json");
inline HttpReply http_get(std::string_view url, double timeout_s = 10) {
  return http_request("GET", url, {}, timeout_s);
}
inline HttpReply http_post_json(std::string_view url, std::string_view body, double timeout_s = 10) {
  return http_request("POST", url, body, timeout_s);
}

}  // namespace gpufrac
