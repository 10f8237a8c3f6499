#include "k8s/agent_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"

namespace gpufrac::k8s {
namespace {

constexpr size_t kMaxLine = 4096;

sockaddr_un socket_address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    throw UsageError("the agent socket " + path +
                     " is longer than a Unix socket path may be; use a shorter --root");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

// Reads up to the first newline before `deadline_ns`; false on timeout, error or a line too long.
bool read_line(int fd, int64_t deadline_ns, std::string& line) {
  char buffer[1024];
  while (line.find('\n') == std::string::npos) {
    int wait_ms = int((deadline_ns - monotonic_ns()) / 1'000'000);
    pollfd p{fd, POLLIN, 0};
    if (wait_ms <= 0 || ::poll(&p, 1, wait_ms) <= 0) return false;
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0 || line.size() + size_t(n) > kMaxLine) return false;
    line.append(buffer, size_t(n));
  }
  line.resize(line.find('\n'));
  return true;
}

bool write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

}  // namespace

Json ask_agent(const std::string& socket_path, const Json& request, double timeout_s) {
  sockaddr_un addr = socket_address(socket_path);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw RuntimeFailure(std::string("socket: ") + std::strerror(errno));
  int64_t deadline = monotonic_ns() + int64_t(timeout_s * 1e9);
  std::string reply;
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  std::string why = ok ? "" : std::strerror(errno);
  if (ok && !write_all(fd, request.dump() + "\n"))
    why = "cannot send the question";
  else if (ok && !read_line(fd, deadline, reply))
    why = "no answer within " + std::to_string(int(timeout_s)) + " s";
  ::close(fd);
  if (!why.empty()) throw RuntimeFailure("the gpufrac agent at " + socket_path + ": " + why);
  Json answer = Json::parse(reply, nullptr, false);
  if (!answer.is_object())
    throw RuntimeFailure("the gpufrac agent at " + socket_path + " answered '" + reply + "'");
  return answer;
}

AgentSocket::AgentSocket(std::string path, Handler handler)
    : path_(std::move(path)), handler_(std::move(handler)) {
  sockaddr_un addr = socket_address(path_);
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw RuntimeFailure(std::string("socket: ") + std::strerror(errno));
  ::unlink(
      path_.c_str());  // a stale socket of an agent that died; the agent lock rules out a live one
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 64) != 0) {
    int err = errno;
    ::close(listen_fd_);
    throw RuntimeFailure("cannot listen on " + path_ + ": " + std::strerror(err));
  }
  ::chmod(path_.c_str(), 0666);
  thread_ = std::thread([this] { serve(); });
}

AgentSocket::~AgentSocket() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::unlink(path_.c_str());
}

void AgentSocket::serve() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    ucred peer{};
    socklen_t length = sizeof peer;
    std::string line;
    Json reply;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) {
      reply = {{"ok", false}, {"error", "cannot tell who asks (SO_PEERCRED)"}};
    } else if (!read_line(fd, monotonic_ns() + 5'000'000'000, line)) {
      reply = {{"ok", false}, {"error", "expected one JSON line"}};
    } else {
      Json request = Json::parse(line, nullptr, false);
      try {
        reply = request.is_object()
                    ? handler_(request, peer.pid)
                    : Json{{"ok", false}, {"error", "the question is not a JSON object"}};
      } catch (const std::exception& e) {
        reply = {{"ok", false}, {"error", e.what()}};
      }
    }
    if (!write_all(fd, reply.dump() + "\n"))
      log_warn("agent socket: the asker (pid ", peer.pid, ") left before the answer");
    ::close(fd);
  }
}

}  // namespace gpufrac::k8s
