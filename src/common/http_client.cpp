#include "common/http_client.h"

#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "common/error.h"
#include "common/http_client_connection.h"

namespace gpufrac {
namespace {

// Why an exchange that wait_for_reply() ended without a whole reply failed.
std::string failure_text(const HttpClientConnection& connection, const ServerAddress& server,
                         HttpClientConnection::ReplyStep step) {
  using Step = HttpClientConnection::ReplyStep;
  if (step == Step::kMalformed) return std::string(connection.parser().error_text());
  if (step == Step::kWouldBlock) {
    return connection.connecting() ? "connect timed out"
           : connection.sending()  ? "timed out sending the request"
                                   : "timed out waiting for the reply";
  }
  if (connection.connect_failed()) return connect_failure(server, connection.error());
  if (connection.send_failed())
    return std::string("send failed: ") + std::strerror(connection.error());
  return "connection closed before the reply was complete";
}

}  // namespace

HttpReply http_request(std::string_view method, std::string_view url, std::string_view body,
                       double timeout_s, std::string_view content_type,
                       const std::vector<std::string>& extra_headers) {
  HttpReply reply;
  HttpUrl target;
  try {
    target = parse_http_url(url, "url");
  } catch (const UsageError& e) {
    reply.error = e.what();
    return reply;
  }
  int64_t deadline = monotonic_ns() + int64_t(timeout_s * 1e9);
  ServerAddress server;
  if (!resolve_server_address(target.host, target.port, server, reply.error)) return reply;

  std::vector<std::string> headers = {"Accept: */*"};
  if (!body.empty() || method == "POST" || method == "PUT") {
    headers.push_back("Content-Type: " + std::string(content_type));
  }
  headers.insert(headers.end(), extra_headers.begin(), extra_headers.end());
  HttpClientConnection connection;
  connection.connect(server.socket);
  if (!connection.connect_failed()) {
    connection.send_request(format_http_request(method, target.path, server, headers, body),
                            method == "HEAD");
  }
  HttpClientConnection::ReplyStep step = connection.wait_for_reply(deadline, reply.body);
  if (step != HttpClientConnection::ReplyStep::kComplete) {
    reply.error = failure_text(connection, server, step);
    return reply;
  }
  reply.status = connection.parser().head().status;
  reply.content_type = std::string(connection.parser().head().header("content-type"));
  return reply;
}

}  // namespace gpufrac
