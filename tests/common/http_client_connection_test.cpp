// HttpClientConnection, the client core under bench, the router's proxy and http_request: connects
// over IPv6 and to host names, finishes partial writes on writable events (driven by an EpollSet),
// tells a complete reply from one cut short, a malformed one and a refused connect, and keeps a
// keep-alive connection for a second request. Servers are the project's HttpServer or, where a
// test needs a misbehaving one, a raw socket scripted per test.
#include "common/http_client_connection.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "common/clock.h"
#include "common/epoll_set.h"
#include "common/http_client.h"
#include "common/http_server.h"
#include "common/raw_http_exchange.h"

namespace gpufrac {
namespace {

using Step = HttpClientConnection::ReplyStep;

constexpr int64_t kTenSeconds = 10'000'000'000;

ServerAddress resolved(const std::string& host, int port) {
  ServerAddress server;
  std::string error;
  EXPECT_TRUE(resolve_server_address(host, port, server, error)) << error;
  return server;
}

// An HttpServer on `host` answering GET /hello with "hi".
class HelloServer {
 public:
  explicit HelloServer(std::string host) : server_(HttpServerOptions{std::move(host)}) {
    server_.route("GET", "/hello", [](const HttpRequest&, std::shared_ptr<HttpResponse> r) {
      r->send(200, "text/plain", "hi");
    });
    server_.start();
  }
  int port() const { return server_.port(); }

 private:
  HttpServer server_;
};

// A loopback server for one connection: `serve` runs on its own thread with the accepted socket.
class OneConnectionServer {
 public:
  explicit OneConnectionServer(std::function<void(int)> serve, int receive_buffer_bytes = 0) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (receive_buffer_bytes > 0) {  // inherited by the accepted socket
      ::setsockopt(listen_fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer_bytes,
                   sizeof receive_buffer_bytes);
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address);
    ::listen(listen_fd_, 1);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this, serve = std::move(serve)] {
      int fd = ::accept(listen_fd_, nullptr, nullptr);
      serve(fd);
      ::close(fd);
    });
  }
  ~OneConnectionServer() {
    thread_.join();
    ::close(listen_fd_);
  }
  ServerAddress address() const { return resolved("127.0.0.1", port_); }

 private:
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

// Reads one request from `fd` (blocking); returns its body.
std::string read_request_body(int fd) {
  HttpParser parser(HttpParser::Kind::kRequest, 64 * 1024, uint64_t(1) << 30);
  std::string body;
  char buffer[65536];
  while (parser.state() != HttpParser::State::kDone) {
    ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0 || parser.state() == HttpParser::State::kError) break;
    parser.feed(std::string_view(buffer, size_t(n)), body);
  }
  return body;
}

void send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    bytes.remove_prefix(size_t(n));
  }
}

std::string get_hello(const ServerAddress& server) {
  return format_http_request("GET", "/hello", server, {}, "");
}

// Sends GET /hello on `connection` to a one-connection server that reads the request, sends
// `reply`, waits `hold_ms` and closes; waits for the answer until `wait_ns` have passed.
Step get_from_raw_server(HttpClientConnection& connection, const std::string& reply,
                         std::string& body, int64_t wait_ns = kTenSeconds, int hold_ms = 0) {
  OneConnectionServer raw([&](int fd) {
    read_request_body(fd);
    send_all(fd, reply);
    std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
  });
  ServerAddress server = raw.address();
  EXPECT_EQ(connection.connect(server.socket), 0);
  connection.send_request(get_hello(server));
  return connection.wait_for_reply(monotonic_ns() + wait_ns, body);
}

TEST(HttpUrl, AuthorityBracketsIpv6Literals) {
  EXPECT_EQ(http_authority("127.0.0.1", 80), "127.0.0.1:80");
  EXPECT_EQ(http_authority("localhost", 8000), "localhost:8000");
  EXPECT_EQ(http_authority("::1", 8000), "[::1]:8000");
  HttpUrl url = parse_http_url("http://[::1]:8123/v1/models", "--target");
  EXPECT_EQ(url.host, "::1");
  EXPECT_EQ(url.port, 8123);
  std::string error;
  ServerAddress server;
  EXPECT_FALSE(resolve_server_address("no-such-host.invalid", 80, server, error));
  EXPECT_NE(error.find("cannot resolve no-such-host.invalid"), std::string::npos) << error;
}

TEST(HttpClientConnection, ConnectsOverIpv6Loopback) {
  if (!testing::ipv6_loopback_available()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  HelloServer hello("::1");
  ServerAddress server = resolved("::1", hello.port());
  EXPECT_EQ(server.socket.storage.ss_family, AF_INET6);
  HttpClientConnection connection;
  ASSERT_EQ(connection.connect(server.socket), 0);
  connection.send_request(get_hello(server));
  std::string body;
  ASSERT_EQ(connection.wait_for_reply(monotonic_ns() + kTenSeconds, body), Step::kComplete);
  EXPECT_EQ(connection.parser().head().status, 200);
  EXPECT_EQ(body, "hi");
  // The blocking client goes the same way, the URL naming the host in brackets.
  HttpReply reply = http_get("http://[::1]:" + std::to_string(hello.port()) + "/hello");
  EXPECT_EQ(reply.status, 200) << reply.error;
  EXPECT_EQ(reply.body, "hi");
}

TEST(HttpClientConnection, ConnectsToAHostName) {
  HelloServer hello("localhost");  // listens where "localhost" resolves first
  ServerAddress server = resolved("localhost", hello.port());
  EXPECT_EQ(server.authority(), "localhost:" + std::to_string(hello.port()));
  HttpClientConnection connection;
  ASSERT_EQ(connection.connect(server.socket), 0);
  connection.send_request(get_hello(server));
  std::string body;
  ASSERT_EQ(connection.wait_for_reply(monotonic_ns() + kTenSeconds, body), Step::kComplete);
  EXPECT_EQ(body, "hi");
  EXPECT_FALSE(connection.reusable());  // format_http_request asks for Connection: close
}

TEST(HttpClientConnection, FinishesAPartialWriteOnWritableEvents) {
  std::string payload(16 << 20, 'x');
  for (size_t i = 0; i < payload.size(); i += 4096) payload[i] = char('a' + (i / 4096) % 26);
  std::atomic<bool> client_saw_backlog{false};
  std::string received;
  OneConnectionServer raw(
      [&](int fd) {
        // Read nothing until the client has seen its write held back.
        for (int i = 0; i < 500 && !client_saw_backlog; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        received = read_request_body(fd);
        send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: " +
                         std::to_string(std::to_string(received.size()).size()) + "\r\n\r\n" +
                         std::to_string(received.size()));
      },
      4096);
  ServerAddress server = raw.address();
  EpollSet epoll;
  HttpClientConnection connection;
  ASSERT_EQ(connection.connect(server.socket), 0);
  connection.watch(epoll, 42);
  EXPECT_EQ(connection.send_request(format_http_request("POST", "/", server, {}, payload)), 0);
  EXPECT_TRUE(connection.sending()) << "the socket took 16 MiB at once: nothing left to test";
  EXPECT_TRUE(connection.wanted_events() & EPOLLOUT);
  client_saw_backlog = true;

  std::string body;
  Step step = Step::kWouldBlock;
  std::vector<epoll_event> ready(4);
  int64_t deadline = monotonic_ns() + kTenSeconds;
  while (step != Step::kComplete && step != Step::kClosed && monotonic_ns() < deadline) {
    for (int i = 0, n = epoll.wait(ready, 100'000'000); i < n; ++i) {
      ASSERT_EQ(ready[size_t(i)].data.u64, 42u);
      if (ready[size_t(i)].events & EPOLLOUT) {
        ASSERT_EQ(connection.on_writable(), 0);
      }
      if (ready[size_t(i)].events & EPOLLIN) step = connection.read_reply(body);
    }
  }
  ASSERT_EQ(step, Step::kComplete);
  EXPECT_FALSE(connection.sending());
  EXPECT_FALSE(connection.wanted_events() & EPOLLOUT);
  EXPECT_EQ(body, std::to_string(payload.size()));
  EXPECT_TRUE(received == payload) << "the server got " << received.size() << " bytes";
}

TEST(HttpClientConnection, AReplyCutShortIsClosedNotComplete) {
  HttpClientConnection connection;
  std::string body;
  const std::string cut = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc";
  EXPECT_EQ(get_from_raw_server(connection, cut, body), Step::kClosed);
  EXPECT_TRUE(connection.reply_started());
  EXPECT_TRUE(connection.parser().head_complete());
  EXPECT_EQ(connection.error(), 0);  // an orderly close, too early
  EXPECT_EQ(body, "abc");
  EXPECT_FALSE(connection.connect_failed());
}

TEST(HttpClientConnection, AServerThatClosesBeforeAnyReplyIsClosedWithoutAReply) {
  HttpClientConnection connection;
  std::string body;
  EXPECT_EQ(get_from_raw_server(connection, "", body), Step::kClosed);
  EXPECT_FALSE(connection.reply_started());
  EXPECT_FALSE(connection.parser().head_complete());
}

TEST(HttpClientConnection, AReplyFramedByTheCloseIsComplete) {
  HttpClientConnection connection;
  std::string body;
  EXPECT_EQ(get_from_raw_server(connection, "HTTP/1.1 200 OK\r\n\r\nuntil the end", body),
            Step::kComplete);
  EXPECT_EQ(body, "until the end");
  EXPECT_FALSE(connection.reusable());
}

TEST(HttpClientConnection, AMalformedReplyIsMalformed) {
  HttpClientConnection connection;
  std::string body;
  EXPECT_EQ(get_from_raw_server(connection, "this is not HTTP\r\n\r\n", body), Step::kMalformed);
  EXPECT_FALSE(connection.parser().error_text().empty());
}

TEST(HttpClientConnection, ARefusedConnectIsAConnectFailure) {
  ServerAddress server = resolved("127.0.0.1", testing::free_port());
  HttpClientConnection connection;
  int error = connection.connect(server.socket);  // refused at once, or on the first event
  if (error == 0) {
    connection.send_request(get_hello(server));
    std::string body;
    EXPECT_EQ(connection.wait_for_reply(monotonic_ns() + kTenSeconds, body), Step::kClosed);
  }
  EXPECT_TRUE(connection.connect_failed());
  EXPECT_EQ(connection.error(), ECONNREFUSED);
  EXPECT_FALSE(connection.reply_started());
  EXPECT_EQ(connect_failure(server, connection.error()),
            "cannot connect to " + server.authority() + ": Connection refused");
}

TEST(HttpClientConnection, AKeepAliveConnectionCarriesASecondRequest) {
  HelloServer hello("127.0.0.1");
  ServerAddress server = resolved("127.0.0.1", hello.port());
  HttpClientConnection connection;
  ASSERT_EQ(connection.connect(server.socket), 0);
  const std::string keep_alive = "GET /hello HTTP/1.1\r\nHost: " + server.authority() + "\r\n\r\n";
  for (int i = 0; i < 2; ++i) {
    connection.send_request(keep_alive);
    std::string body;
    ASSERT_EQ(connection.wait_for_reply(monotonic_ns() + kTenSeconds, body), Step::kComplete) << i;
    EXPECT_EQ(body, "hi");
    EXPECT_TRUE(connection.reusable()) << i;
  }
}

TEST(HttpClientConnection, ADeadlineStopsTheWaitAndSaysWhere) {
  HttpClientConnection connection;
  std::string body;
  // The server holds the connection open for 300 ms without a reply; the wait gives up at 100.
  EXPECT_EQ(get_from_raw_server(connection, "", body, 100'000'000, 300), Step::kWouldBlock);
  EXPECT_FALSE(connection.connecting());
  EXPECT_FALSE(connection.sending());
  EXPECT_FALSE(connection.reply_started());
}

}  // namespace
}  // namespace gpufrac
