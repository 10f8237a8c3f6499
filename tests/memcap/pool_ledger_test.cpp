// The pool rule (pool_ledger.h) on tenant ledgers in one process: tenants trade bytes under a
// pool, floors stay out of the others' reach, ceilings hold, a killed tenant is reclaimed and a
// lock left by a dead process is taken over.
#include "memcap/pool_ledger.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "memcap/process_identity.h"

namespace gpufrac::memcap {
namespace {

using Reservation = PoolLedger::Reservation;

constexpr const char* kUuid = "6a0f2c41-1122-3344-5566-7708090a0b00";

// A tenant of the pool: its ledger and its view of the pool.
struct Tenant {
  TenantLedger ledger;
  PoolLedger pool;
  uint64_t ceiling = 0;
  ~Tenant() {
    pool.close();
    ledger.close();
  }
  Reservation reserve(uint64_t bytes) {
    char why[512];
    return pool.reserve(ledger, 0, bytes, ceiling, why, sizeof why);
  }
  void release(uint64_t bytes) { pool.release(ledger, 0, bytes); }
  uint64_t room() const { return pool.room(ledger, 0); }
};

class PoolLedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/memcap-pool-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    state_ = dir_ + "/state";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Opens tenant `name`'s ledger and the pool; joins with `floor` unless told not to.
  void open(Tenant& tenant, const char* name, uint64_t floor, uint64_t ceiling,
            uint64_t pool_bytes = 1000) {
    char error[512];
    ASSERT_TRUE(tenant.ledger.open(state_.c_str(), name, error, sizeof error)) << error;
    ASSERT_TRUE(tenant.pool.open(state_.c_str(), "gpu", kUuid, error, sizeof error)) << error;
    tenant.ceiling = ceiling;
    ASSERT_TRUE(tenant.pool.join(name, floor, pool_bytes, error, sizeof error)) << error;
  }

  std::string dir_;
  std::string state_;
};

TEST_F(PoolLedgerTest, TwoTenantsTradeBytesBackAndForth) {
  Tenant a, b;
  open(a, "a", 200, 800);
  open(b, "b", 300, 800);
  EXPECT_EQ(a.pool.usage().committed, 500u);  // both floors
  EXPECT_EQ(a.room(), 700u);                  // 1000 - b's floor - nothing used

  EXPECT_EQ(a.reserve(600), Reservation::kReserved);  // 600 + b's 300 floor
  EXPECT_EQ(a.reserve(200), Reservation::kOverPool);  // would take b's floor
  EXPECT_EQ(b.room(), 400u);                          // what a leaves, its floor included
  EXPECT_EQ(b.reserve(300), Reservation::kReserved);
  EXPECT_EQ(b.reserve(100), Reservation::kReserved);  // 600 + 400 = the pool
  EXPECT_EQ(b.reserve(1), Reservation::kOverPool);
  EXPECT_EQ(a.pool.usage().committed, 1000u);

  a.release(400);  // a back to its floor: b may grow into what a gave back
  EXPECT_EQ(b.room(), 400u);
  EXPECT_EQ(b.reserve(400), Reservation::kReserved);
  EXPECT_EQ(a.reserve(1), Reservation::kOverPool);  // a is at its floor, b holds the rest
  b.release(700);
  EXPECT_EQ(a.reserve(500), Reservation::kReserved);  // and back again
  EXPECT_EQ(a.ledger.used(0), 700u);
  EXPECT_EQ(b.ledger.used(0), 100u);
  EXPECT_EQ(a.pool.usage().committed, 1000u);  // 700 + b's floor of 300
  a.release(700);
  b.release(100);
  EXPECT_EQ(a.pool.usage().committed, 500u);
}

TEST_F(PoolLedgerTest, AFloorIsAlwaysItsTenants) {
  Tenant a, b;
  open(a, "a", 600, 1000);
  open(b, "b", 0, 1000);
  EXPECT_EQ(b.reserve(400), Reservation::kReserved);
  EXPECT_EQ(b.reserve(1), Reservation::kOverPool);  // a uses nothing, but 600 are its floor
  EXPECT_EQ(a.reserve(600), Reservation::kReserved);
  EXPECT_EQ(a.reserve(1), Reservation::kOverPool);

  Tenant c;  // a third tenant's floor no longer fits beside a's
  char error[512];
  ASSERT_TRUE(c.ledger.open(state_.c_str(), "c", error, sizeof error));
  ASSERT_TRUE(c.pool.open(state_.c_str(), "gpu", kUuid, error, sizeof error));
  EXPECT_FALSE(c.pool.join("c", 500, 1000, error, sizeof error));
  EXPECT_NE(std::string(error).find("no room for tenant 'c''s floor"), std::string::npos) << error;
  EXPECT_NE(std::string(error).find("GPUFRAC_MEMCAP_FLOOR_BYTES"), std::string::npos) << error;
  EXPECT_TRUE(c.pool.join("c", 400, 1000, error, sizeof error)) << error;
}

// A tenant that joins while the others use the remainder is owed its floor: it may take it, and
// nobody grows above a floor until the pool has room again.
TEST_F(PoolLedgerTest, AFloorJoinedLateIsOwed) {
  Tenant a, b;
  open(a, "a", 100, 1000);
  ASSERT_EQ(a.reserve(900), Reservation::kReserved);
  open(b, "b", 300, 1000);
  EXPECT_EQ(a.pool.usage().committed, 1200u);
  EXPECT_EQ(b.room(), 300u);
  EXPECT_EQ(b.reserve(200), Reservation::kReserved);
  EXPECT_EQ(b.reserve(101), Reservation::kOverPool);
  EXPECT_EQ(a.reserve(1), Reservation::kOverPool);
  a.release(500);
  EXPECT_EQ(a.reserve(300), Reservation::kReserved);  // 700 + b's floor: the pool again
  EXPECT_EQ(a.reserve(1), Reservation::kOverPool);
}

TEST_F(PoolLedgerTest, ACeilingHoldsWhateverThePoolHasLeft) {
  Tenant a;
  open(a, "a", 100, 300);
  EXPECT_EQ(a.reserve(300), Reservation::kReserved);
  EXPECT_EQ(a.reserve(1), Reservation::kOverCeiling);
  EXPECT_EQ(a.room(), 700u);  // the pool would allow it; the ceiling does not
}

TEST_F(PoolLedgerTest, MembersMustAgreeOnThePoolAndTheirFloor) {
  Tenant a, other_process_of_a, b;
  open(a, "a", 100, 500);
  char error[512];
  ASSERT_TRUE(b.ledger.open(state_.c_str(), "b", error, sizeof error));
  ASSERT_TRUE(b.pool.open(state_.c_str(), "gpu", kUuid, error, sizeof error));
  EXPECT_FALSE(b.pool.join("b", 100, 2000, error, sizeof error));
  EXPECT_NE(std::string(error).find("GPUFRAC_MEMCAP_POOL_BYTES"), std::string::npos) << error;
  ASSERT_TRUE(other_process_of_a.pool.open(state_.c_str(), "gpu", kUuid, error, sizeof error));
  EXPECT_FALSE(other_process_of_a.pool.join("a", 200, 1000, error, sizeof error));
  EXPECT_NE(std::string(error).find("with a floor of 100 B, this process gives 200 B"),
            std::string::npos)
      << error;
  EXPECT_TRUE(other_process_of_a.pool.join("a", 100, 1000, error, sizeof error)) << error;
  EXPECT_EQ(a.pool.usage().tenants, 1);
}

TEST_F(PoolLedgerTest, PoolsOfOtherDevicesOrNamesNeverMix) {
  Tenant a;
  open(a, "a", 900, 1000);
  PoolLedger other_gpu, other_name;
  char error[512];
  ASSERT_TRUE(other_gpu.open(state_.c_str(), "gpu", "6a0f2c41-0000-0000-0000-000000000001", error,
                             sizeof error));
  EXPECT_TRUE(other_gpu.join("b", 900, 1000, error, sizeof error)) << error;
  ASSERT_TRUE(other_name.open(state_.c_str(), "node-b", kUuid, error, sizeof error));
  EXPECT_TRUE(other_name.join("b", 900, 1000, error, sizeof error)) << error;
  EXPECT_NE(std::string(other_gpu.path()), a.pool.path());
  other_gpu.close();
  other_name.close();
}

TEST_F(PoolLedgerTest, AKilledTenantIsReclaimed) {
  Tenant a;
  open(a, "a", 100, 1000);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {
    Tenant b;
    char error[512];
    b.ceiling = 1000;
    if (!b.ledger.open(state_.c_str(), "b", error, sizeof error) ||
        !b.pool.open(state_.c_str(), "gpu", kUuid, error, sizeof error) ||
        !b.pool.join("b", 500, 1000, error, sizeof error) ||
        b.reserve(800) != Reservation::kReserved) {
      _exit(1);
    }
    char byte = 1;
    if (write(ready[1], &byte, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  EXPECT_EQ(a.pool.reclaim_gone_tenants(), 0);  // alive: nothing to reclaim
  EXPECT_EQ(a.pool.usage().committed, 900u);
  EXPECT_EQ(a.reserve(300), Reservation::kOverPool);
  kill(child, SIGKILL);
  Reservation reservation = Reservation::kOverPool;
  for (int i = 0; i < 1000 && reservation != Reservation::kReserved; ++i) {
    reservation = a.reserve(300);
    if (reservation != Reservation::kReserved) usleep(1000);
  }
  EXPECT_EQ(reservation, Reservation::kReserved);
  EXPECT_EQ(a.pool.usage().tenants, 1);
  EXPECT_EQ(a.pool.usage().committed, 300u);
  waitpid(child, nullptr, 0);
}

TEST_F(PoolLedgerTest, ALockLeftByADeadProcessIsTakenOver) {
  Tenant a;
  open(a, "a", 0, 1000);
  uint64_t start = 0;
  bool zombie = false;
  ASSERT_TRUE(read_process_start(0, &start, &zombie));
  // The lock word follows the file's two header words (pool_ledger.cpp): a process with our pid
  // but another start time, long gone, holds it.
  int fd = ::open(a.pool.path(), O_RDWR);
  ASSERT_GE(fd, 0);
  void* mapping = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(mapping, MAP_FAILED);
  auto* lock = static_cast<std::atomic<uint64_t>*>(mapping) + 2;
  ASSERT_EQ(lock->load(), 0u);
  lock->store(make_identity(getpid(), start + 1));
  EXPECT_EQ(a.reserve(10), Reservation::kReserved);
  EXPECT_EQ(lock->load(), 0u);
  munmap(mapping, 4096);
}

// Threads of two tenants hammer one pool: what they hold together never passes the pool, and no
// tenant passes its ceiling.
TEST_F(PoolLedgerTest, ManyThreadsOfTwoTenantsNeverExceedThePool) {
  constexpr uint64_t kPool = 1000, kCeiling = 700;
  Tenant tenants[2];
  open(tenants[0], "a", 100, kCeiling, kPool);
  open(tenants[1], "b", 100, kCeiling, kPool);
  std::atomic<uint64_t> held_total{0}, peak_total{0};
  std::atomic<uint64_t> held[2] = {0, 0}, peak[2] = {0, 0};
  std::atomic<int> refused{0};
  auto raise_peak = [](std::atomic<uint64_t>& high, uint64_t now) {
    uint64_t seen = high.load();
    while (now > seen && !high.compare_exchange_weak(seen, now)) {
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      Tenant& tenant = tenants[t % 2];
      std::mt19937 rng(t);
      std::vector<uint64_t> mine;
      for (int i = 0; i < 5000; ++i) {
        if (mine.size() == 4 || (!mine.empty() && rng() % 2 == 0)) {
          uint64_t bytes = mine.back();
          mine.pop_back();
          held[t % 2].fetch_sub(bytes);
          held_total.fetch_sub(bytes);
          tenant.release(bytes);
          continue;
        }
        uint64_t bytes = 1 + rng() % 200;
        if (tenant.reserve(bytes) != Reservation::kReserved) {
          ++refused;
          continue;
        }
        mine.push_back(bytes);
        usleep(10);  // the driver's call: others get their turn meanwhile
        raise_peak(peak[t % 2], held[t % 2].fetch_add(bytes) + bytes);
        raise_peak(peak_total, held_total.fetch_add(bytes) + bytes);
      }
      for (uint64_t bytes : mine) {
        held[t % 2].fetch_sub(bytes);
        held_total.fetch_sub(bytes);
        tenant.release(bytes);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_LE(peak_total.load(), kPool);
  EXPECT_GT(peak_total.load(), kCeiling);  // the tenants did share the pool
  EXPECT_LE(peak[0].load(), kCeiling);
  EXPECT_LE(peak[1].load(), kCeiling);
  EXPECT_GT(refused.load(), 0);
  EXPECT_EQ(tenants[0].pool.usage().committed, 200u);  // back to the two floors
}

// The same across processes, where only the pool's lock word keeps the tenants apart: two
// processes (one per tenant) of four threads each, each asking for far more than its ceiling,
// count what they hold in shared memory. (Without the lock word, the peak passes the pool.)
TEST_F(PoolLedgerTest, ProcessesOfTwoTenantsNeverExceedThePool) {
  constexpr uint64_t kPool = 1000, kCeiling = 700;
  struct Shared {
    std::atomic<uint64_t> held_total, peak_total;
    std::atomic<int> refused, started;
  };
  void* memory =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(memory, MAP_FAILED);
  Shared* shared = new (memory) Shared{};
  pid_t children[2];
  for (int c = 0; c < 2; ++c) {
    children[c] = fork();
    if (children[c] != 0) continue;
    Tenant tenant;
    char error[512];
    tenant.ceiling = kCeiling;
    const char* name = c == 0 ? "a" : "b";
    if (!tenant.ledger.open(state_.c_str(), name, error, sizeof error) ||
        !tenant.pool.open(state_.c_str(), "gpu", kUuid, error, sizeof error) ||
        !tenant.pool.join(name, 100, kPool, error, sizeof error)) {
      _exit(1);
    }
    ++shared->started;  // both processes start hammering together
    while (shared->started.load() < 2) sched_yield();
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng(10 * c + t);
        std::vector<uint64_t> mine;
        for (int i = 0; i < 20000; ++i) {
          if (mine.size() == 4 || (!mine.empty() && rng() % 2 == 0)) {
            shared->held_total.fetch_sub(mine.back());
            tenant.release(mine.back());
            mine.pop_back();
            continue;
          }
          uint64_t bytes = 1 + rng() % 200;
          if (tenant.reserve(bytes) != Reservation::kReserved) {
            ++shared->refused;
            continue;
          }
          mine.push_back(bytes);
          uint64_t now = shared->held_total.fetch_add(bytes) + bytes;
          uint64_t seen = shared->peak_total.load();
          while (now > seen && !shared->peak_total.compare_exchange_weak(seen, now)) {
          }
        }
        for (uint64_t bytes : mine) {
          shared->held_total.fetch_sub(bytes);
          tenant.release(bytes);
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    _exit(0);
  }
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_LE(shared->peak_total.load(), kPool);
  EXPECT_GT(shared->refused.load(), 0);
  munmap(memory, sizeof(Shared));
}

}  // namespace
}  // namespace gpufrac::memcap
