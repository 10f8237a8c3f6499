// reserve_engine_port: ports below the kernel's ephemeral range (where neither outgoing connections
// nor binds to port 0 land), free once released, and not the same one every time; a held port
// cannot be bound by anyone else (so no other draw takes it) until it is released, and then can.
#include "node/engine_port.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <set>

namespace gpufrac {
namespace {

bool can_listen_on(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(uint16_t(port));
  bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
            ::listen(fd, 1) == 0;
  if (fd >= 0) ::close(fd);
  return ok;
}

TEST(EnginePort, DrawnFreeBelowTheEphemeralRange) {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 32768, high = 60999;
  range >> low >> high;
  if (low <= 20000) GTEST_SKIP() << "the ephemeral range starts at " << low << ": no room below";
  std::set<int> seen;
  for (int i = 0; i < 32; ++i) {
    int port = reserve_engine_port().port();
    EXPECT_GE(port, 20000);
    EXPECT_LT(port, low);
    EXPECT_TRUE(can_listen_on(port)) << port;
    seen.insert(port);
  }
  EXPECT_GT(seen.size(), 16u) << "the ports are drawn, not one fixed choice";
}

TEST(EnginePort, AReservedPortIsTakenUntilReleased) {
  EnginePortReservation held = reserve_engine_port();
  ASSERT_GT(held.port(), 0);
  EXPECT_FALSE(can_listen_on(held.port())) << "another bind took a reserved port";
  EnginePortReservation moved = std::move(held);
  EXPECT_EQ(held.port(), 0);
  EXPECT_FALSE(can_listen_on(moved.port())) << "the move released the port";
  moved.release();
  EXPECT_TRUE(can_listen_on(moved.port()));
}

}  // namespace
}  // namespace gpufrac
