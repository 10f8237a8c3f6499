// TurnLock: a turn excludes every other holder of the file (another open of it, as another
// process would have) until the Turn goes; try_take() gives a turn only when no one else has
// one; a lock without a path grants every turn; an unopenable path names the flag.
#include "common/turn_lock.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>

#include "common/error.h"

namespace gpufrac {
namespace {

class TurnLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gf-turns-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string file() const { return dir_ + "/turns.lock"; }

  std::string dir_;
};

TEST_F(TurnLockTest, ATurnExcludesOtherHoldersUntilItEnds) {
  TurnLock mine(file(), "--my-lock");
  TurnLock other(file(), "--my-lock");
  {
    TurnLock::Turn turn = mine.take();
    EXPECT_FALSE(other.try_take().has_value());
  }
  {
    std::optional<TurnLock::Turn> turn = other.try_take();
    ASSERT_TRUE(turn.has_value());
    EXPECT_FALSE(mine.try_take().has_value());
  }
  std::optional<TurnLock::Turn> again = mine.try_take();  // free again once the turn went
  EXPECT_TRUE(again.has_value());
}

TEST_F(TurnLockTest, AnotherProcessWaitsForTheTurnAndGetsItWhenItEnds) {
  TurnLock mine(file(), "--my-lock");
  std::optional<TurnLock::Turn> turn = mine.take();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // another engine: refused while the parent holds the turn, then let in
    TurnLock theirs(file(), "--my-lock");
    bool refused = !theirs.try_take().has_value();
    char byte = 1;
    (void)!::write(ready[1], &byte, 1);
    TurnLock::Turn taken = theirs.take();  // blocks until the parent's turn ends
    ::_exit(refused ? 0 : 1);
  }
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  turn.reset();
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the other process got a turn while this one held it";
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST_F(TurnLockTest, AHolderThatDiesGivesTheTurnBack) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    TurnLock theirs(file(), "--my-lock");
    TurnLock::Turn turn = theirs.take();
    ::_exit(0);  // no destructor runs: the kernel drops the lock with the process
  }
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  TurnLock mine(file(), "--my-lock");
  EXPECT_TRUE(mine.try_take().has_value());
}

TEST(TurnLock, WithoutAPathGrantsEveryTurn) {
  TurnLock lock("", "--my-lock");
  EXPECT_NO_THROW({ TurnLock::Turn turn = lock.take(); });
  std::optional<TurnLock::Turn> first = lock.try_take();
  std::optional<TurnLock::Turn> second = lock.try_take();
  EXPECT_TRUE(first.has_value() && second.has_value());
}

TEST(TurnLock, AnUnopenablePathNamesTheFlag) {
  try {
    TurnLock lock("/nonexistent-directory-of-gpufrac/turns.lock", "--my-lock");
    FAIL() << "opened a file in a missing directory";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--my-lock"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("/nonexistent-directory-of-gpufrac"), std::string::npos);
  }
}

}  // namespace
}  // namespace gpufrac
