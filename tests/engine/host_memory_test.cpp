// host_available_memory_bytes honours RLIMIT_DATA (the memory cap a CPU node gives each model),
// checked in a forked child so the test process keeps its own limit.
#include "engine/cpu/host_memory.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace gpufrac::engine {
namespace {

uint64_t vm_data_bytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  uint64_t kib = 0;
  while (in >> key) {
    if (key == "VmData:" && in >> kib) return kib * 1024;
  }
  return 0;
}

TEST(HostMemory, NeverMoreThanMemAvailable) {
  EXPECT_GT(host_available_memory_bytes(), 0u);
}

TEST(HostMemory, RlimitDataCapsTheAvailableMemory) {
  constexpr uint64_t kHeadroom = uint64_t(300) << 20;
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    rlimit limit{};
    limit.rlim_cur = limit.rlim_max = vm_data_bytes() + kHeadroom;
    if (setrlimit(RLIMIT_DATA, &limit) != 0) _exit(3);
    uint64_t available = host_available_memory_bytes();
    // Between the headroom less what the call itself maps, and the headroom plus what the
    // measuring above held while it read /proc (its stream buffer: a few KiB).
    constexpr uint64_t kSlack = uint64_t(1) << 20;
    _exit(available <= kHeadroom + kSlack && available >= kHeadroom - (uint64_t(64) << 20) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: available memory ignores RLIMIT_DATA; 3: setrlimit failed";
}

}  // namespace
}  // namespace gpufrac::engine
