#include "memcap/tenant_ledger.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "memcap/process_identity.h"

namespace gpufrac::memcap {
namespace {

using Reservation = TenantLedger::Reservation;

class TenantLedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/memcap-ledger-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void open(TenantLedger& ledger, const char* tenant = "t") {
    char error[512];
    ASSERT_TRUE(ledger.open((dir_ + "/state").c_str(), tenant, error, sizeof error)) << error;
  }

  std::string dir_;
};

TEST_F(TenantLedgerTest, ReservesWithinTheCapAndReleases) {
  TenantLedger ledger;
  open(ledger);
  EXPECT_EQ(ledger.reserve(0, 600, 1000), Reservation::kReserved);
  EXPECT_EQ(ledger.reserve(0, 500, 1000), Reservation::kOverCap);
  EXPECT_EQ(ledger.reserve(1, 500, 1000), Reservation::kReserved);  // devices are separate
  EXPECT_EQ(ledger.used(0), 600u);
  EXPECT_EQ(ledger.own_reserved(0), 600u);
  ledger.release(0, 600);
  EXPECT_EQ(ledger.used(0), 0u);
  EXPECT_EQ(ledger.reserve(0, 1000, 1000), Reservation::kReserved);
  ledger.close();
}

TEST_F(TenantLedgerTest, TenantsAreSeparate) {
  TenantLedger a, b;
  open(a, "a");
  open(b, "b");
  EXPECT_EQ(a.reserve(0, 900, 1000), Reservation::kReserved);
  EXPECT_EQ(b.reserve(0, 900, 1000), Reservation::kReserved);
  a.close();
  b.close();
}

TEST_F(TenantLedgerTest, ManyThreadsNeverHoldMoreThanTheCap) {
  TenantLedger ledger;
  open(ledger);
  constexpr uint64_t kCap = 1000;
  std::atomic<uint64_t> held{0}, peak{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<uint64_t> mine;  // up to 4 held at once: together far more than the cap
      for (int i = 0; i < 20000; ++i) {
        if (mine.size() == 4 || (!mine.empty() && rng() % 2 == 0)) {
          uint64_t bytes = mine.back();
          mine.pop_back();
          held.fetch_sub(bytes);
          ledger.release(0, bytes);
          continue;
        }
        uint64_t bytes = 1 + rng() % 300;
        if (ledger.reserve(0, bytes, kCap) != Reservation::kReserved) {
          ++refused;
          continue;
        }
        mine.push_back(bytes);
        uint64_t now = held.fetch_add(bytes) + bytes;
        uint64_t high = peak.load();
        while (now > high && !peak.compare_exchange_weak(high, now)) {
        }
      }
      for (uint64_t bytes : mine) {
        held.fetch_sub(bytes);
        ledger.release(0, bytes);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_LE(peak.load(), kCap);
  EXPECT_GT(refused.load(), 0);  // the cap was really contended
  EXPECT_EQ(ledger.used(0), 0u);
  ledger.close();
}

TEST_F(TenantLedgerTest, AKilledProcessReservationIsReclaimed) {
  TenantLedger ledger;
  open(ledger);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {
    TenantLedger mine;
    char error[512];
    if (!mine.open((dir_ + "/state").c_str(), "t", error, sizeof error) ||
        mine.reserve(0, 700, 1000) != Reservation::kReserved) {
      _exit(1);
    }
    char byte = 1;
    if (write(ready[1], &byte, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  EXPECT_EQ(ledger.used(0), 700u);
  EXPECT_EQ(ledger.reclaim_dead_processes(), 0);  // alive: nothing to reclaim
  EXPECT_EQ(ledger.reserve(0, 700, 1000), Reservation::kOverCap);
  kill(child, SIGKILL);
  // Not reaped yet: a zombie holds no GPU memory either. (SIGKILL lands asynchronously.)
  Reservation reservation = Reservation::kOverCap;
  for (int i = 0; i < 1000 && reservation != Reservation::kReserved; ++i) {
    reservation = ledger.reserve(0, 700, 1000);
    if (reservation != Reservation::kReserved) usleep(1000);
  }
  EXPECT_EQ(reservation, Reservation::kReserved);
  EXPECT_EQ(ledger.used(0), 700u);
  waitpid(child, nullptr, 0);
  ledger.close();
}

TEST_F(TenantLedgerTest, AReusedPidIsNotMistakenForTheDeadProcess) {
  uint64_t start = 0;
  bool zombie = false;
  ASSERT_TRUE(read_process_start(0, &start, &zombie));
  TenantLedger old_process;  // our pid, but another start time: a dead process whose pid we got
  old_process.set_identity(make_identity(getpid(), start + 1));
  open(old_process);
  ASSERT_EQ(old_process.reserve(0, 800, 1000), Reservation::kReserved);
  TenantLedger ledger;
  open(ledger);
  EXPECT_EQ(ledger.reclaim_dead_processes(), 1);
  EXPECT_EQ(ledger.used(0), 0u);
  old_process.close();
  ledger.close();
}

TEST_F(TenantLedgerTest, ASlotLeftBeforeExecIsReclaimedWhenThisImageClaimsOne) {
  TenantLedger before_exec;  // same pid and start time: the image that exec'd into this one
  open(before_exec);
  ASSERT_EQ(before_exec.reserve(0, 800, 1000), Reservation::kReserved);
  TenantLedger after_exec;
  open(after_exec);
  EXPECT_EQ(after_exec.reclaim_dead_processes(), 0);  // not judged outside a claim
  EXPECT_EQ(after_exec.reserve(0, 900, 1000), Reservation::kReserved);
  EXPECT_EQ(after_exec.used(0), 900u);
  before_exec.close();
  after_exec.close();
}

TEST_F(TenantLedgerTest, TheLastUserToLeaveRemovesTheLedgerFile) {
  TenantLedger a, b;
  open(a);
  open(b);
  const std::string path = a.path();
  ASSERT_TRUE(std::filesystem::exists(path));
  a.remove_if_last_user();  // b has it open
  EXPECT_TRUE(std::filesystem::exists(path));
  a.close();
  b.remove_if_last_user();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(b.reserve(0, 10, 100), Reservation::kReserved);  // still usable on the way out
  b.close();
  TenantLedger c;
  open(c);
  EXPECT_EQ(c.used(0), 0u);
  c.close();
}

TEST_F(TenantLedgerTest, UnusableStateDirFailsWithTheReason) {
  TenantLedger ledger;
  char error[512];
  EXPECT_FALSE(ledger.open("/proc/gpufrac-no-such-dir", "t", error, sizeof error));
  EXPECT_NE(std::string(error).find("GPUFRAC_MEMCAP_STATE_DIR"), std::string::npos) << error;
  std::filesystem::create_directories(dir_ + "/state");
  std::ofstream(dir_ + "/state/odd.ledger") << "not a ledger";
  EXPECT_FALSE(ledger.open((dir_ + "/state").c_str(), "odd", error, sizeof error));
  EXPECT_NE(std::string(error).find("remove it"), std::string::npos) << error;
}

TEST(ProcessIdentity, TellsLiveFromDeadProcesses) {
  uint64_t me = current_process_identity();
  ASSERT_NE(me, 0u);
  EXPECT_EQ(identity_pid(me), getpid());
  EXPECT_TRUE(identity_alive(me));
  EXPECT_FALSE(identity_alive(me + 1));  // same pid, other start time
  pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  uint64_t start = 0;
  bool zombie = true;
  ASSERT_TRUE(read_process_start(child, &start, &zombie));
  EXPECT_FALSE(zombie);
  uint64_t identity = make_identity(child, start);
  EXPECT_TRUE(identity_alive(identity));
  kill(child, SIGKILL);
  for (int i = 0; i < 1000 && identity_alive(identity); ++i) usleep(1000);  // becomes a zombie
  EXPECT_FALSE(identity_alive(identity));
  waitpid(child, nullptr, 0);
  EXPECT_FALSE(identity_alive(identity));
}

}  // namespace
}  // namespace gpufrac::memcap
