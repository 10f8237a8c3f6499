// Elastic memory through the shim: tenants with a floor and a ceiling share a device's pool
// (GPUFRAC_MEMCAP_POOL_BYTES, pool_ledger.h). Each test runs memcap_probe processes of two
// tenants against the fake driver, whose devices hold 1 GiB each.
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

std::string info(unsigned long long free, unsigned long long total) {
  return "info free=" + std::to_string(free) + " total=" + std::to_string(total);
}

// Tenant `tenant` with `ceiling` and `floor` in a pool of `pool` bytes on every device.
Environment pooled(const MemcapSandbox& sandbox, const std::string& tenant,
                   const std::string& ceiling, const std::string& floor, const std::string& pool) {
  Environment env = sandbox.environment(ceiling);
  env["GPUFRAC_MEMCAP_TENANT"] = tenant;
  env["GPUFRAC_MEMCAP_FLOOR_BYTES"] = floor;
  env["GPUFRAC_MEMCAP_POOL_BYTES"] = pool;
  return env;
}

// Two tenants with 64 MiB floors and 448 MiB ceilings in a 512 MiB pool: 384 MiB go from one to
// the other and back is refused while the other holds them.
TEST(MemcapPool, TwoTenantsTradeBytesBackAndForth) {
  MemcapSandbox sandbox;
  auto turn = [&](const char* name) { return sandbox.dir() + "/" + name; };
  RunningProgram a(
      sandbox.probe_argv({"init", "alloc", "384M", "touch", turn("a1"), "await", turn("b1"), "info",
                          "free", "0", "touch", turn("a2"), "await", turn("b2"), "alloc", "384M",
                          "info", "touch", turn("a3")}),
      pooled(sandbox, "a", "448M", "64M", "512M"));
  RunningProgram b(sandbox.probe_argv({"init", "await", turn("a1"), "info", "alloc", "384M",
                                       "touch", turn("b1"), "await", turn("a2"), "alloc", "384M",
                                       "info", "touch", turn("b2"), "await", turn("a3")}),
                   pooled(sandbox, "b", "448M", "64M", "512M"));
  ProgramResult ra = a.wait();
  ProgramResult rb = b.wait();
  // a: its 384 MiB plus b's floor fill the pool; once b holds them, a has only its floor.
  EXPECT_EQ(ra.lines, (Lines{"init ok", "alloc 384M ok", "touch a1", "await b1",
                             info(64 * kMiB, 448 * kMiB), "free 0 ok", "touch a2", "await b2",
                             "alloc 384M oom", info(128 * kMiB, 448 * kMiB), "touch a3"}))
      << ra.stderr_text;
  EXPECT_EQ(rb.lines, (Lines{"init ok", "await a1", info(128 * kMiB, 448 * kMiB), "alloc 384M oom",
                             "touch b1", "await a2", "alloc 384M ok", info(64 * kMiB, 448 * kMiB),
                             "touch b2", "await a3"}))
      << rb.stderr_text;
  EXPECT_NE(
      ra.stderr_text.find("tenant 'a' holds 0 B (floor 64.00 MiB, ceiling 448.00 MiB) and "
                          "the other tenants of its 512.00 MiB pool leave it 128.00 MiB more"),
      std::string::npos)
      << ra.stderr_text;
  EXPECT_EQ(sandbox.device_peak(0), 384 * kMiB);
  EXPECT_EQ(sandbox.device_used(0), 0u);
}

TEST(MemcapPool, ATenantWhoseFloorNoLongerFitsIsRefusedAtInit) {
  MemcapSandbox sandbox;
  RunningProgram a(sandbox.probe_argv({"init", "hold"}),
                   pooled(sandbox, "a", "1G", "400M", "512M"));
  ASSERT_TRUE(a.wait_for_line("holding"));
  ProgramResult r = run_program(sandbox.probe_argv({"init", "alloc", "1M"}),
                                pooled(sandbox, "b", "1G", "200M", "512M"));
  EXPECT_EQ(r.lines, (Lines{"init not_permitted", "alloc 1M not_permitted"}));
  EXPECT_NE(r.stderr_text.find("the floors of the tenants in it take 400.00 MiB of its 512.00 "
                               "MiB, no room for tenant 'b''s floor of 200.00 MiB"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("refusing CUDA memory calls"), std::string::npos) << r.stderr_text;
  r = run_program(sandbox.probe_argv({"init", "alloc", "100M"}),
                  pooled(sandbox, "b", "1G", "100M", "512M"));
  EXPECT_EQ(r.lines, (Lines{"init ok", "alloc 100M ok"})) << r.stderr_text;
}

TEST(MemcapPool, AKilledTenantIsReclaimedFromThePool) {
  MemcapSandbox sandbox;
  RunningProgram a(sandbox.probe_argv({"init", "alloc", "400M", "hold"}),
                   pooled(sandbox, "a", "1G", "0", "512M"));
  ASSERT_TRUE(a.wait_for_line("holding"));
  Environment b = pooled(sandbox, "b", "1G", "0", "512M");
  ProgramResult r = run_program(sandbox.probe_argv({"init", "info", "alloc", "200M"}), b);
  EXPECT_EQ(r.lines, (Lines{"init ok", info(112 * kMiB, kMiB << 10), "alloc 200M oom"}))
      << r.stderr_text;
  a.send_signal(SIGKILL);
  a.wait();
  r = run_program(sandbox.probe_argv({"init", "alloc", "400M", "info"}), b);
  EXPECT_EQ(r.lines, (Lines{"init ok", "alloc 400M ok", info(112 * kMiB, kMiB << 10)}))
      << r.stderr_text;
}

TEST(MemcapPool, AForkChildJoinsForItselfAndIsReclaimed) {
  MemcapSandbox sandbox;
  ProgramResult r =
      run_program(sandbox.probe_argv({"init", "alloc", "40M", "fork", "info", "alloc", "40M",
                                      "alloc", "40M", "end", "alloc", "40M", "info"}),
                  pooled(sandbox, "t", "1G", "0", "100M"));
  // As under a cap alone (MemcapProcesses.AForkChildSharesTheCapFromItsOwnSlot), with the pool
  // as the limit: the child exits holding 40 MiB, which the parent's next allocation reclaims.
  EXPECT_EQ(r.lines, (Lines{"init ok", "alloc 40M ok", "child " + info(60 * kMiB, kMiB << 10),
                            "child alloc 40M ok", "child alloc 40M oom", "fork exit=0",
                            "alloc 40M ok", info(20 * kMiB, kMiB << 10)}))
      << r.stderr_text;
}

// Two tenants, one stress process each (run_stress_pair): together they never hold more than the
// pool on the fake GPU.
TEST(MemcapPool, ManyThreadsOfTwoTenantsNeverExceedThePoolTogether) {
  constexpr unsigned long long kPool = 384 * kMiB;
  auto run_pair = [](MemcapSandbox& sandbox, bool with_pool) {
    std::vector<Environment> envs;
    for (const char* tenant : {"a", "b"}) {
      envs.push_back(with_pool ? pooled(sandbox, tenant, "256M", "32M", "384M")
                               : sandbox.environment("256M"));
      envs.back()["GPUFRAC_MEMCAP_TENANT"] = tenant;
    }
    return run_stress_pair(sandbox.probe_argv({}), envs[0], envs[1]);
  };
  MemcapSandbox pooled_gpu;
  expect_stress_reached(run_pair(pooled_gpu, true), "pool");
  EXPECT_LE(pooled_gpu.device_peak(0), kPool);
  EXPECT_EQ(pooled_gpu.device_used(0), 0u);

  // The same two tenants under their ceilings alone go past the pool.
  MemcapSandbox ceilings_only;
  run_pair(ceilings_only, false);
  EXPECT_GT(ceilings_only.device_peak(0), kPool);
}

TEST(MemcapPool, AFloorWithoutAPoolRefusesCuda) {
  MemcapSandbox sandbox;
  ProgramResult r =
      sandbox.probe({"init", "alloc", "1M"}, "1G", {{"GPUFRAC_MEMCAP_FLOOR_BYTES", "100M"}});
  EXPECT_EQ(r.lines, (Lines{"init not_permitted", "alloc 1M not_permitted"}));
  EXPECT_NE(r.stderr_text.find("GPUFRAC_MEMCAP_FLOOR_BYTES is set but GPUFRAC_MEMCAP_POOL_BYTES "
                               "is not"),
            std::string::npos)
      << r.stderr_text;
}

TEST(MemcapPool, TheMemcapCommandRunsACommandInAPool) {
  MemcapSandbox sandbox;
  const char* gpufrac = getenv("GPUFRAC_BIN");
  ASSERT_NE(gpufrac, nullptr);
  Environment env = sandbox.environment(std::nullopt);
  env["LD_PRELOAD"] = std::nullopt;  // the command sets it
  std::vector<std::string> argv = {
      gpufrac, "memcap",      "--bytes",           "64M", "--floor", "16M", "--pool-bytes",
      "96M",   "--state-dir", sandbox.state_dir(), "--"};
  for (const std::string& word : sandbox.probe_argv({"init", "info", "alloc", "64M", "info"})) {
    argv.push_back(word);
  }
  ProgramResult r = run_program(argv, env);
  EXPECT_EQ(r.lines,
            (Lines{"init ok", info(64 * kMiB, 64 * kMiB), "alloc 64M ok", info(0, 64 * kMiB)}))
      << r.stderr_text;

  r = run_program({gpufrac, "memcap", "--bytes", "1G", "--floor", "1G", "--pool-bytes", "80G",
                   "--pool", "node-a", "--print-env"},
                  env);
  EXPECT_EQ(r.exit_code, 0);
  ASSERT_EQ(r.lines.size(), 7u) << r.stdout_text;
  EXPECT_EQ(r.lines[4], "export GPUFRAC_MEMCAP_FLOOR_BYTES='1G'");
  EXPECT_EQ(r.lines[5], "export GPUFRAC_MEMCAP_POOL_BYTES='80G'");
  EXPECT_EQ(r.lines[6], "export GPUFRAC_MEMCAP_POOL='node-a'");

  r = run_program(
      {gpufrac, "memcap", "--bytes", "1G", "--floor", "2G", "--pool-bytes", "80G", "--", "true"},
      env);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("--floor: device 0's floor (2147483648 bytes) is above its ceiling "
                               "in --bytes"),
            std::string::npos)
      << r.stderr_text;
  r = run_program({gpufrac, "memcap", "--bytes", "1G", "--floor", "1G", "--", "true"}, env);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("--floor is set but --pool-bytes is not"), std::string::npos)
      << r.stderr_text;
}

}  // namespace
}  // namespace memcap_test
