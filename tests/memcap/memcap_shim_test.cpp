// The shim under one process: what is counted, what is refused, what is reported, and how it
// fails closed. Each test runs memcap_probe (a CUDA driver API program) under LD_PRELOAD against
// the fake driver, whose devices hold 1 GiB each.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "probe_runner.h"

namespace memcap_test {
namespace {

using Lines = std::vector<std::string>;

constexpr unsigned long long kMiB = 1ull << 20;
constexpr unsigned long long kGiB = 1ull << 30;

std::string info(unsigned long long free, unsigned long long total) {
  return "info free=" + std::to_string(free) + " total=" + std::to_string(total);
}

TEST(MemcapShim, WithoutACapEverythingIsTheDriversOwn) {
  MemcapSandbox sandbox;
  ProgramResult r = sandbox.probe(
      {"init", "info", "alloc", "512M", "info", "alloc", "600M", "total", "0"}, std::nullopt);
  EXPECT_EQ(r.lines, (Lines{"init ok", info(kGiB, kGiB), "alloc 512M ok", info(512 * kMiB, kGiB),
                            "alloc 600M oom", "total 0 bytes=1073741824"}))
      << r.stderr_text;
}

TEST(MemcapShim, AllocationsPastTheCapFailWithOutOfMemory) {
  MemcapSandbox sandbox;
  ProgramResult r = sandbox.probe({"init", "alloc", "200M", "alloc", "100M", "info", "free", "0",
                                   "alloc", "100M", "info", "alloc", "156M", "alloc", "1"},
                                  "256M");
  EXPECT_EQ(r.lines, (Lines{"init ok", "alloc 200M ok", "alloc 100M oom",
                            info(56 * kMiB, 256 * kMiB), "free 0 ok", "alloc 100M ok",
                            info(156 * kMiB, 256 * kMiB), "alloc 156M ok", "alloc 1 oom"}))
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("out of memory on device 0: 100.00 MiB asked, tenant 't' holds "
                               "200.00 MiB of its 256.00 MiB cap"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(sandbox.device_peak(0), 256 * kMiB);
  // The only process of the tenant removed the ledger when it exited.
  EXPECT_FALSE(std::filesystem::exists(sandbox.state_dir() + "/t.ledger"));
}

TEST(MemcapShim, ReportsTheCapOrTheDevicesOwnNumbersWhicheverIsSmaller) {
  MemcapSandbox sandbox;
  // The device has 1 GiB with 900 MiB in use by others: 124 MiB free, under a 256 MiB cap.
  ProgramResult r = sandbox.probe({"init", "info", "total", "0", "total", "1"}, "0=256M",
                                  {{"FAKE_CUDA_OTHERS_BYTES", std::to_string(900 * kMiB)}});
  EXPECT_EQ(r.lines, (Lines{"init ok", info(124 * kMiB, 256 * kMiB), "total 0 bytes=268435456",
                            "total 1 bytes=1073741824"}))
      << r.stderr_text;
  // A cap larger than the device: the device's numbers.
  r = sandbox.probe({"init", "info", "total", "0"}, "4G");
  EXPECT_EQ(r.lines, (Lines{"init ok", info(kGiB, kGiB), "total 0 bytes=1073741824"}));
}

TEST(MemcapShim, ThePitchTheDriverChoseIsCounted) {
  MemcapSandbox sandbox;
  // 1000-byte rows are padded to a 1024-byte pitch: 16384 rows take 16 MiB.
  ProgramResult r =
      sandbox.probe({"init", "pitch", "1000", "16384", "info", "free", "0", "info"}, "64M");
  EXPECT_EQ(r.lines, (Lines{"init ok", "pitch 1000 16384 ok pitch=1024", info(48 * kMiB, 64 * kMiB),
                            "free 0 ok", info(64 * kMiB, 64 * kMiB)}))
      << r.stderr_text;
}

TEST(MemcapShim, ManagedMemoryIsCounted) {
  MemcapSandbox sandbox;
  ProgramResult r = sandbox.probe({"init", "managed", "48M", "managed", "32M", "info"}, "64M");
  EXPECT_EQ(r.lines,
            (Lines{"init ok", "managed 48M ok", "managed 32M oom", info(16 * kMiB, 64 * kMiB)}))
      << r.stderr_text;
}

// Physical memory lives until its handle is released AND it is unmapped; releasing the handle
// right after mapping it (a common pattern) must not uncount it.
TEST(MemcapShim, VirtualMemoryIsCountedUntilItsLastMappingIsGone) {
  MemcapSandbox sandbox;
  ProgramResult r =
      sandbox.probe({"init",    "create", "48M",   "map",        "0",    "release", "0",   "create",
                     "32M",     "info",   "unmap", "0",          "info", "create",  "32M", "map",
                     "1",       "retain", "1",     "release",    "1",    "unmap",   "1",   "info",
                     "release", "1",      "info",  "hostcreate", "128M"},
                    "64M");
  EXPECT_EQ(r.lines,
            (Lines{"init ok", "create 48M ok", "map 0 ok", "release 0 ok", "create 32M oom",
                   info(16 * kMiB, 64 * kMiB), "unmap 0 ok", info(64 * kMiB, 64 * kMiB),
                   "create 32M ok", "map 1 ok", "retain 1 ok", "release 1 ok", "unmap 1 ok",
                   info(32 * kMiB, 64 * kMiB),  // the retained reference still holds it
                   "release 1 ok", info(64 * kMiB, 64 * kMiB),
                   "hostcreate 128M ok"}))  // host memory is not the GPU's
      << r.stderr_text;
  EXPECT_EQ(sandbox.device_used(0), 0u);
}

TEST(MemcapShim, StreamOrderedAndPoolAllocationsAreCountedAndReleased) {
  MemcapSandbox sandbox;
  ProgramResult r =
      sandbox.probe({"init", "async", "40M",       "pool", "40M",   "freeasync", "0",
                     "pool", "40M",   "devpool",   "20M",  "async", "8M",        "hostpool",
                     "100M", "info",  "freeasync", "1",    "free",  "2",         "info"},
                    "64M");
  EXPECT_EQ(r.lines,
            (Lines{"init ok", "async 40M ok", "pool 40M oom", "freeasync 0 ok", "pool 40M ok",
                   "devpool 20M ok", "async 8M oom", "hostpool 100M ok", info(4 * kMiB, 64 * kMiB),
                   "freeasync 1 ok", "free 2 ok", info(64 * kMiB, 64 * kMiB)}))
      << r.stderr_text;
}

TEST(MemcapShim, PerThreadStreamVariantsAreCountedToo) {
  MemcapSandbox sandbox;
  ProgramResult r = sandbox.probe({"--api", "procaddress", "--per-thread", "init", "async", "40M",
                                   "async", "40M", "freeasync", "0", "async", "40M"},
                                  "64M");
  EXPECT_EQ(r.lines,
            (Lines{"init ok", "async 40M ok", "async 40M oom", "freeasync 0 ok", "async 40M ok"}))
      << r.stderr_text;
}

TEST(MemcapShim, TearingDownAContextReleasesItsAllocations) {
  MemcapSandbox sandbox;
  ProgramResult r =
      sandbox.probe({"init", "alloc", "48M", "reset", "alloc", "48M", "ctxcreate", "alloc", "10M",
                     "ctxdestroy", "device", "0", "alloc", "16M", "info"},
                    "64M");
  EXPECT_EQ(r.lines, (Lines{"init ok", "alloc 48M ok", "reset ok", "alloc 48M ok", "ctxcreate ok",
                            "alloc 10M ok", "ctxdestroy ok", "device 0 ok", "alloc 16M ok",
                            info(0, 64 * kMiB)}))
      << r.stderr_text;
}

TEST(MemcapShim, TheThirtyTwoBitVariantsAreRefusedOrClamped) {
  MemcapSandbox sandbox;
  ProgramResult r = sandbox.probe({"init", "alloc32", "1M", "info32"}, "256M");
  EXPECT_EQ(r.lines,
            (Lines{"init ok", "alloc32 1M not_supported", "info32 free=268435456 total=268435456"}))
      << r.stderr_text;
  r = sandbox.probe({"init", "alloc32", "1M"}, std::nullopt);
  EXPECT_EQ(r.lines, (Lines{"init ok", "alloc32 1M ok"}));
}

TEST(MemcapShim, NvmlReportsTheCapOfTheMatchingCudaDevice) {
  MemcapSandbox sandbox;
  // NVML lists the fake devices in reverse: NVML 0 is CUDA device 1, the capped one.
  ProgramResult r = sandbox.probe(
      {"device", "1", "alloc", "100M", "nvml", "0", "nvml2", "0", "nvml", "1"}, "1=256M");
  EXPECT_EQ(r.lines, (Lines{"device 1 ok", "alloc 100M ok",
                            "nvml 0 total=268435456 free=163577856 used=104857600",
                            "nvml2 0 total=268435456 free=163577856 used=104857600 reserved=0",
                            "nvml 1 total=1073741824 free=1073741824 used=0"}))
      << r.stderr_text;
  r = sandbox.probe({"device", "1", "alloc", "100M", "nvml", "0"}, std::nullopt);
  EXPECT_EQ(r.lines, (Lines{"device 1 ok", "alloc 100M ok",
                            "nvml 0 total=1073741824 free=968884224 used=104857600"}));
}

// Before the process has initialized CUDA, the shim must not do it for NVML (a parent that
// initializes CUDA cannot fork CUDA workers): it matches devices through CUDA_VISIBLE_DEVICES.
TEST(MemcapShim, NvmlBeforeCudaIsInitializedLeavesCudaAlone) {
  MemcapSandbox sandbox;
  // The UUID of fake CUDA device 1, which NVML lists first: CUDA ordinal 0 of this process.
  Environment by_uuid = {{"CUDA_VISIBLE_DEVICES", "GPU-6a0f2c41-1122-3344-5566-7708090a0b01"}};
  ProgramResult r = sandbox.probe({"nvml", "0", "nvml", "1", "initialized"}, "0=256M", by_uuid);
  EXPECT_EQ(r.lines, (Lines{"nvml 0 total=268435456 free=268435456 used=0",
                            "nvml 1 total=1073741824 free=1073741824 used=0", "initialized no"}))
      << r.stderr_text;
  Environment by_index = {{"CUDA_VISIBLE_DEVICES", "1"}};
  r = sandbox.probe({"nvml", "0", "nvml2", "1", "initialized"}, "0=256M", by_index);
  EXPECT_EQ(r.lines,
            (Lines{"nvml 0 total=1073741824 free=1073741824 used=0",
                   "nvml2 1 total=268435456 free=268435456 used=0 reserved=0", "initialized no"}))
      << r.stderr_text;
}

TEST(MemcapShim, AnInvalidConfigurationRefusesCudaInsteadOfRunningUncapped) {
  MemcapSandbox sandbox;
  ProgramResult r = sandbox.probe({"init", "alloc", "1M", "info"}, "lots");
  EXPECT_EQ(r.lines, (Lines{"init not_permitted", "alloc 1M not_permitted", "info not_permitted"}));
  EXPECT_NE(r.stderr_text.find("GPUFRAC_MEMCAP_BYTES='lots' is not a size"), std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("refusing CUDA memory calls"), std::string::npos);

  r = sandbox.probe({"init"}, "1G", {{"GPUFRAC_MEMCAP_STATE_DIR", "/proc/gpufrac-no-such-dir"}});
  EXPECT_EQ(r.lines, (Lines{"init not_permitted"}));
  EXPECT_NE(r.stderr_text.find("cannot create GPUFRAC_MEMCAP_STATE_DIR"), std::string::npos)
      << r.stderr_text;

  r = sandbox.probe({"init"}, "1G", {{"GPUFRAC_MEMCAP_TENANT", "no/slashes"}});
  EXPECT_EQ(r.lines, (Lines{"init not_permitted"}));

  // Without a cap, a bad tenant name does not matter.
  r = sandbox.probe({"init"}, std::nullopt, {{"GPUFRAC_MEMCAP_TENANT", "no/slashes"}});
  EXPECT_EQ(r.lines, (Lines{"init ok"}));
}

}  // namespace
}  // namespace memcap_test
