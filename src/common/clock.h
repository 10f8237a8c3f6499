// Monotonic time in nanoseconds, the one clock every measurement in gpufrac uses.
#pragma once

#include <cstdint>
#include <ctime>

namespace gpufrac {

inline int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

inline double ns_to_ms(int64_t ns) { return double(ns) / 1e6; }

}  // namespace gpufrac
