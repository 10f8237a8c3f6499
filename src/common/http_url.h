// Where an HTTP server is: "http://host:port/path" URLs (parse_http_url), and the socket address a
// host and port resolve to (resolve_server_address: getaddrinfo, so IPv4 and IPv6 literals and
// host names such as "localhost"). Every HTTP client of the project (http_client.h,
// http_client_connection.h) connects to a ServerAddress.
//
// Thread-safe (no shared state). resolve_server_address blocks while a name is looked up: event
// loops resolve once, when they learn the address (bench at start, the router when a replica's
// state arrives), never per request on their loop thread.
#pragma once

#include <sys/socket.h>

#include <string>
#include <string_view>

namespace gpufrac {

struct HttpUrl {
  std::string host;  // "127.0.0.1", "localhost", "::1" (written [::1] in the URL)
  int port = 80;
  std::string path;  // "/v1/completions" (with query), "/" when empty
};
// Parses "http://host:port/path"; throws UsageError naming `what` when it isn't one.
HttpUrl parse_http_url(std::string_view url, std::string_view what);

// "host:port", with an IPv6 literal in brackets ("[::1]:8000"): for Host headers and messages.
std::string http_authority(std::string_view host, int port);

// A socket address (IPv4 or IPv6) to connect() to.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const sockaddr* as_sockaddr() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

// A server as it was named (host, port) and the address that resolved to (getaddrinfo's first
// answer).
struct ServerAddress {
  std::string host;
  int port = 0;
  SocketAddress socket;
  std::string authority() const { return http_authority(host, port); }
};
// False with `error` ("cannot resolve HOST: why") when the host does not resolve.
bool resolve_server_address(std::string_view host, int port, ServerAddress& out,
                            std::string& error);

}  // namespace gpufrac
