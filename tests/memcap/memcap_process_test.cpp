// The cap across processes: processes of one tenant share it (and never exceed it together, even
// hammered from many threads), a killed process's memory is reclaimed, a fork child gets its own
// share of the ledger, and `gpufrac memcap` runs a command under the cap.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "probe_runner.h"

namespace memcap_test {
namespace {

using Lines = std::vector<std::string>;

constexpr unsigned long long kMiB = 1ull << 20;

TEST(MemcapProcesses, ProcessesOfOneTenantShareTheCap) {
  MemcapSandbox sandbox;
  RunningProgram holder(sandbox.probe_argv({"init", "alloc", "200M", "hold"}),
                        sandbox.environment("256M"));
  ASSERT_TRUE(holder.wait_for_line("holding"));
  ProgramResult r = sandbox.probe({"init", "info", "alloc", "100M", "alloc", "50M"}, "256M");
  EXPECT_EQ(r.lines, (Lines{"init ok", "info free=58720256 total=268435456", "alloc 100M oom",
                            "alloc 50M ok"}))
      << r.stderr_text;
  r = sandbox.probe({"init", "alloc", "200M"}, "256M", {{"GPUFRAC_MEMCAP_TENANT", "other"}});
  EXPECT_EQ(r.lines, (Lines{"init ok", "alloc 200M ok"})) << "another tenant has its own cap";
}

TEST(MemcapProcesses, AProcessUnderASmallerCapSeesZeroFreeNotAnUnderflow) {
  MemcapSandbox sandbox;
  RunningProgram holder(sandbox.probe_argv({"init", "alloc", "400M", "hold"}),
                        sandbox.environment("512M"));
  ASSERT_TRUE(holder.wait_for_line("holding"));
  ProgramResult r =
      sandbox.probe({"init", "info", "alloc", "1", "nvml", "1", "nvml2", "1"}, "256M");
  EXPECT_EQ(r.lines, (Lines{"init ok", "info free=0 total=268435456", "alloc 1 oom",
                            "nvml 1 total=268435456 free=0 used=268435456",
                            "nvml2 1 total=268435456 free=0 used=268435456 reserved=0"}))
      << r.stderr_text;
}

TEST(MemcapProcesses, AKilledProcessReservationIsReclaimed) {
  MemcapSandbox sandbox;
  RunningProgram holder(sandbox.probe_argv({"init", "alloc", "200M", "hold"}),
                        sandbox.environment("256M"));
  ASSERT_TRUE(holder.wait_for_line("holding"));
  ProgramResult r = sandbox.probe({"init", "alloc", "200M"}, "256M");
  EXPECT_EQ(r.lines, (Lines{"init ok", "alloc 200M oom"}));
  holder.send_signal(SIGKILL);
  holder.wait();
  r = sandbox.probe({"init", "info", "alloc", "200M"}, "256M");
  EXPECT_EQ(r.lines, (Lines{"init ok", "info free=268435456 total=268435456", "alloc 200M ok"}))
      << r.stderr_text;
}

TEST(MemcapProcesses, AForkChildSharesTheCapFromItsOwnSlot) {
  MemcapSandbox sandbox;
  ProgramResult r = sandbox.probe({"init", "alloc", "40M", "fork", "info", "alloc", "40M", "alloc",
                                   "40M", "free", "0", "info", "end", "alloc", "40M", "info"},
                                  "100M");
  // The child sees its parent's 40 MiB (and cannot free its parent's memory, as with a real
  // driver); it exits holding 40 MiB of its own, which the parent's next allocation reclaims.
  EXPECT_EQ(r.lines,
            (Lines{"init ok", "alloc 40M ok", "child info free=62914560 total=104857600",
                   "child alloc 40M ok", "child alloc 40M oom", "child free 0 invalid_value",
                   "child info free=20971520 total=104857600", "fork exit=0", "alloc 40M ok",
                   "info free=20971520 total=104857600"}))
      << r.stderr_text;
}

// Two processes of one tenant, eight threads each, allocating and freeing through every kind of
// allocation, with a delay inside the driver that would expose any check-then-allocate race: the
// fake GPU records the peak that both processes held together.
TEST(MemcapProcesses, ManyThreadsInTwoProcessesNeverExceedTheCapTogether) {
  constexpr unsigned long long kCap = 256 * kMiB;
  auto run_pair = [](MemcapSandbox& sandbox, const std::optional<std::string>& caps) {
    Environment env = sandbox.environment(caps);
    return run_stress_pair(sandbox.probe_argv({}), env, env);
  };
  MemcapSandbox capped;
  expect_stress_reached(run_pair(capped, "256M"), "cap");
  EXPECT_LE(capped.device_peak(0), kCap);
  EXPECT_EQ(capped.device_used(0), 0u);

  // The same load without the cap goes past it: the bound above is the shim's doing.
  MemcapSandbox uncapped;
  run_pair(uncapped, std::nullopt);
  EXPECT_GT(uncapped.device_peak(0), kCap);
}

TEST(MemcapCommand, RunsACommandUnderTheCap) {
  MemcapSandbox sandbox;
  const char* gpufrac = getenv("GPUFRAC_BIN");
  ASSERT_NE(gpufrac, nullptr);
  Environment env = sandbox.environment(std::nullopt);
  env["LD_PRELOAD"] = std::nullopt;  // the command sets it
  env["GPUFRAC_MEMCAP_TENANT"] = std::nullopt;
  std::vector<std::string> argv = {
      gpufrac, "memcap", "--bytes", "64M", "--state-dir", sandbox.state_dir(), "--"};
  for (const std::string& word :
       sandbox.probe_argv({"init", "alloc", "48M", "alloc", "48M", "info"})) {
    argv.push_back(word);
  }
  ProgramResult r = run_program(argv, env);
  EXPECT_EQ(r.lines, (Lines{"init ok", "alloc 48M ok", "alloc 48M oom",
                            "info free=16777216 total=67108864"}))
      << r.stderr_text;

  r = run_program({gpufrac, "memcap", "--bytes", "0=1G", "--tenant", "a", "--print-env"}, env);
  EXPECT_EQ(r.exit_code, 0);
  ASSERT_EQ(r.lines.size(), 4u) << r.stdout_text;
  EXPECT_EQ(r.lines[1], "export GPUFRAC_MEMCAP_BYTES='0=1G'");
  EXPECT_EQ(r.lines[2], "export GPUFRAC_MEMCAP_TENANT='a'");
  EXPECT_NE(r.lines[0].find("libgpufrac_memcap.so'"), std::string::npos) << r.lines[0];

  r = run_program({gpufrac, "memcap", "--bytes", "lots", "--", "true"}, env);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("--bytes='lots' is not a size"), std::string::npos) << r.stderr_text;
  r = run_program({gpufrac, "memcap", "--bytes", "1G"}, env);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("after '--'"), std::string::npos) << r.stderr_text;
}

}  // namespace
}  // namespace memcap_test
