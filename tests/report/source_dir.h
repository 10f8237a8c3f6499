// Test helper: the source tree, from GPUFRAC_SOURCE_DIR (set by ctest), else the path CMake
// compiled in — ctest currently loses GPUFRAC_SOURCE_DIR (gtest_discover_tests splits the
// ENVIRONMENT list of tests/CMakeLists.txt), and a test binary run by hand has no env either.
#pragma once

#include <cstdlib>
#include <string>

namespace gpufrac::testing {

inline std::string source_dir() {
  const char* from_env = std::getenv("GPUFRAC_SOURCE_DIR");
  return from_env ? from_env : GPUFRAC_SOURCE_DIR_AT_BUILD;
}

}  // namespace gpufrac::testing
