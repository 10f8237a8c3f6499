// Every way a program reaches the driver is capped the same: linked symbols, dlopen + dlsym,
// cuGetProcAddress (with base names, and through a cuGetProcAddress looked up with itself),
// whether the driver hands out its exported symbols or internal pointers, and whichever variant of
// a function the program asks for. And the shim's dlsym leaves everyone else's lookups
// (RTLD_NEXT) as they were.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "probe_runner.h"

namespace memcap_test {
namespace {

using Lines = std::vector<std::string>;

class MemcapPaths : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(MemcapPaths, EveryPathIsCappedTheSame) {
  const auto& [api, table] = GetParam();
  MemcapSandbox sandbox;
  ProgramResult r = sandbox.probe(
      {"--api", api,      "init", "alloc", "40M", "alloc",  "40M", "async", "16M", "pool",
       "16M",   "create", "16M",  "free",  "0",   "create", "32M", "map",   "0",   "release",
       "0",     "pool",   "24M",  "unmap", "0",   "pool",   "24M", "info"},
      "64M", {{"FAKE_CUDA_PROC_TABLE", table}});
  EXPECT_EQ(r.lines, (Lines{"init ok", "alloc 40M ok", "alloc 40M oom", "async 16M ok",
                            "pool 16M oom", "create 16M oom", "free 0 ok", "create 32M ok",
                            "map 0 ok", "release 0 ok", "pool 24M oom", "unmap 0 ok", "pool 24M ok",
                            "info free=25165824 total=67108864"}))
      << r.stderr_text;
}

// A context's teardown frees its memory without a cuMemFree per pointer; the shim forgets those
// pointers the same through the older variants (cuDevicePrimaryCtxRelease/Reset, which a CUDA 13
// program asked for at version 7000 on the H200, and cuCtxDestroy) as through the _v2 ones.
TEST_P(MemcapPaths, ContextTeardownThroughEitherVariantForgetsItsAllocations) {
  const auto& [api, table] = GetParam();
  MemcapSandbox sandbox;
  for (std::string v1 : {"", "-v1"}) {
    const std::string reset = "reset" + v1, release = "primaryrelease" + v1,
                      destroy = "ctxdestroy" + v1;
    ProgramResult r =
        sandbox.probe({"--api", api,   "init",  "alloc",  "48M", "alloc", "48M", reset,
                       "alloc", "48M", release, "device", "0",   "alloc", "48M", "ctxcreate",
                       "alloc", "10M", destroy, "device", "0",   "alloc", "16M", "info"},
                      "64M", {{"FAKE_CUDA_PROC_TABLE", table}});
    EXPECT_EQ(r.lines,
              (Lines{"init ok", "alloc 48M ok", "alloc 48M oom", reset + " ok", "alloc 48M ok",
                     release + " ok", "device 0 ok", "alloc 48M ok", "ctxcreate ok", "alloc 10M ok",
                     destroy + " ok", "device 0 ok", "alloc 16M ok", "info free=0 total=67108864"}))
        << r.stderr_text;
    EXPECT_EQ(r.stderr_text.find("does not know"), std::string::npos) << r.stderr_text;
  }
}

INSTANTIATE_TEST_SUITE_P(ApisAndProcTables, MemcapPaths,
                         ::testing::Combine(::testing::Values("direct", "dlsym", "procaddress",
                                                              "procaddress-self"),
                                            ::testing::Values("exported", "private")),
                         [](const auto& info) {
                           std::string name =
                               std::get<0>(info.param) + "_" + std::get<1>(info.param);
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

// A driver newer than the shim may hand out a variant the shim cannot wrap: refusing it beats
// handing it out uncapped.
TEST(MemcapPathsRefuse, UnknownVariantsOfCappedFunctions) {
  MemcapSandbox sandbox;
  Environment newer = {{"FAKE_CUDA_NEWER_MEMALLOC", "1"}};
  ProgramResult r =
      sandbox.probe({"lookup", "cuMemAlloc", "13000", "lookup", "cuMemAlloc", "12000", "dlsym",
                     "cuMemAlloc_v3", "dlsym", "cuMemAlloc_v2", "dlsym", "cuMemAllocHost_v2"},
                    "1G", newer);
  EXPECT_EQ(r.lines, (Lines{"lookup cuMemAlloc 13000 not_supported",
                            "lookup cuMemAlloc 12000 ok found", "dlsym cuMemAlloc_v3 missing",
                            "dlsym cuMemAlloc_v2 found", "dlsym cuMemAllocHost_v2 missing"}))
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("'cuMemAlloc' for CUDA 13000 is a variant this memcap does not "
                               "know"),
            std::string::npos)
      << r.stderr_text;
  // Without a cap the shim hands out whatever the driver has.
  r = sandbox.probe({"lookup", "cuMemAlloc", "13000", "dlsym", "cuMemAlloc_v3"}, std::nullopt,
                    newer);
  EXPECT_EQ(r.lines, (Lines{"lookup cuMemAlloc 13000 ok found", "dlsym cuMemAlloc_v3 found"}));
}

// The older variants of interposed functions that a driver hands out for an older CUDA version
// are answered with the shim's hooks, not refused as unknown.
TEST(MemcapPathsOlderVariants, AreHandedOutHookedNotRefused) {
  MemcapSandbox sandbox;
  Environment private_table = {{"FAKE_CUDA_PROC_TABLE", "private"}};
  ProgramResult r = sandbox.probe(
      {"lookup", "cuDevicePrimaryCtxRelease", "7000", "lookup", "cuDevicePrimaryCtxReset", "7000",
       "lookup", "cuCtxDestroy", "2000", "lookup", "cuMemFree", "2000"},
      "0=64M", private_table);
  EXPECT_EQ(r.lines, (Lines{"lookup cuDevicePrimaryCtxRelease 7000 ok found",
                            "lookup cuDevicePrimaryCtxReset 7000 ok found",
                            "lookup cuCtxDestroy 2000 ok found", "lookup cuMemFree 2000 ok found"}))
      << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("does not know"), std::string::npos) << r.stderr_text;
  // The 32-bit free works where the 32-bit allocation is allowed: on an uncapped device.
  r = sandbox.probe({"--api", "procaddress", "device", "1", "alloc32", "1M", "free32", "0"},
                    "0=64M", private_table);
  EXPECT_EQ(r.lines, (Lines{"device 1 ok", "alloc32 1M ok", "free32 0 ok"})) << r.stderr_text;
}

TEST(MemcapPathsRtldNext, OtherLibrariesLookupsAreUnchanged) {
  MemcapSandbox sandbox;
  ProgramResult r = run_program({MEMCAP_RTLD_NEXT_PROBE}, sandbox.environment("1G"));
  EXPECT_EQ(r.lines, (Lines{"2"})) << r.stderr_text;
  r = run_program({MEMCAP_RTLD_NEXT_PROBE}, {});
  EXPECT_EQ(r.lines, (Lines{"2"})) << r.stderr_text;
}

}  // namespace
}  // namespace memcap_test
