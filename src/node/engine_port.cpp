#include "node/engine_port.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <random>
#include <utility>

#include "common/error.h"

namespace gpufrac {
namespace {

constexpr int kLowestEnginePort = 20000;
constexpr int kDraws = 64;

// The lowest port of the kernel's ephemeral range (32768 when it cannot be read).
int ephemeral_low() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  return (in >> low >> high) && low > 0 ? low : 32768;
}

// Binds 127.0.0.1:`port` (0: the kernel chooses) without SO_REUSEADDR and keeps it bound: the
// reservation, or one of port 0 and fd -1 when the port is taken.
EnginePortReservation bind_port(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {0, -1};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(uint16_t(port));
  socklen_t length = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0) {
    return {ntohs(addr.sin_port), fd};
  }
  ::close(fd);
  return {0, -1};
}

}  // namespace

EnginePortReservation::EnginePortReservation(EnginePortReservation&& other) noexcept
    : port_(std::exchange(other.port_, 0)), fd_(std::exchange(other.fd_, -1)) {}

EnginePortReservation& EnginePortReservation::operator=(EnginePortReservation&& other) noexcept {
  if (this != &other) {
    release();
    port_ = std::exchange(other.port_, 0);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void EnginePortReservation::release() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

EnginePortReservation reserve_engine_port() {
  static std::mutex mutex;
  static std::mt19937 draw{std::random_device{}()};
  const int high = ephemeral_low() - 1;
  if (high >= kLowestEnginePort) {
    std::uniform_int_distribution<int> ports(kLowestEnginePort, high);
    for (int i = 0; i < kDraws; ++i) {
      int port = 0;
      {
        std::lock_guard lock(mutex);
        port = ports(draw);
      }
      if (EnginePortReservation held = bind_port(port); held.port() == port) return held;
    }
  }
  if (EnginePortReservation held = bind_port(0); held.port() != 0) return held;
  throw RuntimeFailure("cannot find a free port on 127.0.0.1");
}

}  // namespace gpufrac
