#include "common/http_url.h"

#include <netdb.h>

#include <cstring>

#include "common/error.h"
#include "common/strings.h"

namespace gpufrac {

HttpUrl parse_http_url(std::string_view url, std::string_view what) {
  auto bad = [&](std::string_view why) {
    return UsageError(std::string(what) + ": '" + std::string(url) + "' is not an http URL (" +
                      std::string(why) + "; e.g. http://127.0.0.1:8000)");
  };
  if (!starts_with(url, "http://")) throw bad("it must start with http://");
  std::string_view rest = url.substr(7);
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  HttpUrl parsed;
  parsed.path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  size_t colon = authority.rfind(':');
  if (!authority.empty() && authority.front() == '[') {  // [::1]:8000
    size_t close = authority.find(']');
    if (close == std::string_view::npos) throw bad("unclosed [");
    parsed.host = std::string(authority.substr(1, close - 1));
    colon = authority.find(':', close);
  } else {
    parsed.host = std::string(authority.substr(0, colon));
  }
  if (parsed.host.empty()) throw bad("no host");
  if (colon != std::string_view::npos) {
    int64_t port = parse_int(authority.substr(colon + 1), what);
    if (port <= 0 || port > 65535) throw bad("port out of range");
    parsed.port = int(port);
  }
  return parsed;
}

std::string http_authority(std::string_view host, int port) {
  std::string text =
      host.find(':') == std::string_view::npos ? std::string(host) : "[" + std::string(host) + "]";
  return text + ":" + std::to_string(port);
}

bool resolve_server_address(std::string_view host, int port, ServerAddress& out,
                            std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::string host_text(host);
  std::string port_text = std::to_string(port);
  if (int rc = ::getaddrinfo(host_text.c_str(), port_text.c_str(), &hints, &found); rc != 0) {
    error = "cannot resolve " + host_text + ": " + ::gai_strerror(rc);
    return false;
  }
  std::memcpy(&out.socket.storage, found->ai_addr, found->ai_addrlen);
  out.socket.length = found->ai_addrlen;
  ::freeaddrinfo(found);
  out.host = std::move(host_text);
  out.port = port;
  return true;
}

}  // namespace gpufrac
