// What the shim cannot see: driver_bypass_probe finds libcuda's functions in the library's own
// symbol table (no dlsym, no cuGetProcAddress) and so allocates past the shim's cap on the fake
// driver, where the same program asking dlsym is held to it. This is the client of the GPU
// suite tests/gpu/security/run, which shows that in `fractions` MPS's pinned-memory limit (the
// driver) stops it all the same; here, on the CPU, it checks that the bypass is real and that the
// probe reports where each function it called lives.
#include <gtest/gtest.h>

#include <string>

#include "common/json.h"
#include "probe_runner.h"

namespace memcap_test {
namespace {

gpufrac::Json run_bypass(const MemcapSandbox& sandbox, const std::string& resolve,
                         const std::optional<std::string>& caps, bool preload = true) {
  Environment environment = sandbox.environment(caps);
  if (!preload) environment["LD_PRELOAD"] = std::nullopt;
  ProgramResult r = run_program(
      {MEMCAP_BYPASS_PROBE, "--resolve", resolve, "--cap", "64M", "--chunk", "8M"}, environment);
  EXPECT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  gpufrac::Json result = gpufrac::Json::parse(r.stdout_text, nullptr, false);
  EXPECT_TRUE(result.is_object()) << r.stdout_text;
  return result.is_object() ? result : gpufrac::Json::object();
}

bool all_in(const gpufrac::Json& functions, const std::string& library) {
  if (!functions.is_object() || functions.empty()) return false;
  for (const auto& [name, path] : functions.items()) {
    if (path.get<std::string>().find(library) == std::string::npos) return false;
  }
  return true;
}

// Where the memory functions the probe called live (the shim hooks those, not cuDeviceGet or
// cuCtxSetCurrent): all in `library`.
bool memory_functions_in(const gpufrac::Json& functions, const std::string& library) {
  if (!functions.is_object()) return false;
  for (const char* name : {"cuMemGetInfo_v2", "cuMemAlloc_v2", "cuMemFree_v2"}) {
    if (!functions.contains(name) ||
        functions[name].get<std::string>().find(library) == std::string::npos) {
      return false;
    }
  }
  return true;
}

TEST(MemcapBypass, DlsymIsHeldToTheCap) {
  MemcapSandbox sandbox;
  gpufrac::Json r = run_bypass(sandbox, "dlsym", "64M");
  EXPECT_TRUE(memory_functions_in(r["functions"], "libgpufrac_memcap")) << r.dump();
  EXPECT_EQ(r["init"], "ok");
  EXPECT_EQ(r["total_bytes"], 64 << 20);  // the shim reports its cap
  EXPECT_EQ(r["half_cap"], "ok");
  EXPECT_EQ(r["over_cap"], "oom");
  EXPECT_EQ(r["chunks_bytes"], 64 << 20);
  EXPECT_EQ(r["chunks_ended_by"], "oom");
  EXPECT_LE(sandbox.device_peak(0), 64ull << 20);
}

TEST(MemcapBypass, TheDriversOwnSymbolTableStepsAroundTheShim) {
  MemcapSandbox sandbox;
  gpufrac::Json r = run_bypass(sandbox, "elf", "64M");
  EXPECT_TRUE(all_in(r["functions"], "libcuda.so")) << r.dump();
  EXPECT_NE(r["dlsym_cuMemAlloc_v2"].get<std::string>().find("libgpufrac_memcap"),
            std::string::npos)
      << "the shim was not loaded, so nothing was stepped around: " << r.dump();
  EXPECT_EQ(r["total_bytes"], 1 << 30);  // the driver's own answer, not the cap
  EXPECT_EQ(r["over_cap"], "ok");
  EXPECT_EQ(r["chunks_bytes"], 128 << 20);  // --max-total, twice the cap
  EXPECT_EQ(r["chunks_ended_by"], "max_total");
  EXPECT_GE(sandbox.device_peak(0), 128ull << 20);
}

TEST(MemcapBypass, WithoutTheShimBothWaysReachTheDriver) {
  MemcapSandbox sandbox;
  for (const char* resolve : {"dlsym", "elf"}) {
    gpufrac::Json r = run_bypass(sandbox, resolve, std::nullopt, false);
    EXPECT_TRUE(all_in(r["functions"], "libcuda.so")) << resolve << ": " << r.dump();
    EXPECT_EQ(r["over_cap"], "ok") << resolve;
    EXPECT_EQ(r["chunks_ended_by"], "max_total") << resolve;
  }
}

}  // namespace
}  // namespace memcap_test
