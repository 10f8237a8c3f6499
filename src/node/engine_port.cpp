#include "node/engine_port.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <random>

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

// Binds 127.0.0.1:`port` (0: the kernel chooses) and releases it; the port bound, or 0.
int bind_and_release(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(uint16_t(port));
  socklen_t length = sizeof addr;
  int bound = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0) {
    bound = ntohs(addr.sin_port);
  }
  ::close(fd);
  return bound;
}

}  // namespace

int pick_engine_port() {
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
      if (bind_and_release(port) == port) return port;
    }
  }
  if (int port = bind_and_release(0)) return port;
  throw RuntimeFailure("cannot find a free port on 127.0.0.1");
}

}  // namespace gpufrac
