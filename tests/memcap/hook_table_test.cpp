// The shim's table of interposed driver functions (memcap/hook_table.h) against the toolkit's
// cudaTypedefs.h, which names every variant that cuGetProcAddress hands out, with the CUDA version
// it came in (PFN_cuMemFree_v2000, PFN_cuMemFree_v3020, PFN_cuMemAllocAsync_v11020_ptsz). A
// variant missing from the table is refused when a program asks for it (on the H200 a CUDA 13
// program asked for cuDevicePrimaryCtxRelease at 7000); a wrong version picks the wrong hook.
#include "memcap/hook_table.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

using gpufrac::memcap::Library;

struct Variant {
  std::string base;
  int version;
  bool per_thread;
  auto operator<=>(const Variant&) const = default;
};

std::ostream& operator<<(std::ostream& out, const Variant& variant) {
  return out << variant.base << " at " << variant.version
             << (variant.per_thread ? " (per-thread stream)" : "");
}

std::set<Variant> interposed_driver_variants() {
  std::set<Variant> variants;
#define GPUFRAC_MEMCAP_VARIANT(symbol, base, version, per_thread, library, hooked) \
  if (Library::library == Library::kCuda && hooked) variants.insert({base, version, per_thread});
  GPUFRAC_MEMCAP_ENTRY_POINTS(GPUFRAC_MEMCAP_VARIANT)
#undef GPUFRAC_MEMCAP_VARIANT
  return variants;
}

// Every PFN_<base>_v<version>[_ptsz|_ptds] in the header whose base is in `bases`.
std::set<Variant> toolkit_variants(const std::string& path, const std::set<std::string>& bases) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  std::string header = text.str();
  std::set<Variant> variants;
  static const std::regex pfn(R"(\bPFN_([A-Za-z0-9]+)_v([0-9]+)(_ptsz|_ptds)?\b)");
  for (std::sregex_iterator it(header.begin(), header.end(), pfn), end; it != end; ++it) {
    if (bases.count((*it)[1].str()) != 0) {
      variants.insert({(*it)[1].str(), std::stoi((*it)[2].str()), (*it)[3].matched});
    }
  }
  return variants;
}

TEST(HookTable, HasEveryVariantOfAnInterposedFunctionThatTheToolkitNames) {
#ifndef GPUFRAC_CUDA_TYPEDEFS_H
  GTEST_SKIP() << "the CUDA toolkit's cudaTypedefs.h is not installed here";
#else
  std::set<Variant> table = interposed_driver_variants();
  std::set<std::string> bases;
  for (const Variant& variant : table) bases.insert(variant.base);
  std::set<Variant> toolkit = toolkit_variants(GPUFRAC_CUDA_TYPEDEFS_H, bases);
  ASSERT_FALSE(toolkit.empty()) << "no PFN_ typedefs read from " << GPUFRAC_CUDA_TYPEDEFS_H;
  for (const Variant& variant : toolkit) {
    EXPECT_EQ(table.count(variant), 1u)
        << "the toolkit has " << variant << "; hook_table.h does not (add it, with its hook)";
  }
  for (const Variant& variant : table) {
    EXPECT_EQ(toolkit.count(variant), 1u)
        << "hook_table.h has " << variant << "; the toolkit has no such variant";
  }
#endif
}

}  // namespace
