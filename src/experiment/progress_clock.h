// The experiment's progress across run points: a line on stderr when a point starts ("[3/18]
// fractions-m2 c=4, elapsed 4m10s, about 12m left") and when it ends. The estimate is the mean
// time of the points finished so far times the points left. Bench prints the live request count
// of the running point beneath it. Single-threaded.
#pragma once

#include <cstdint>
#include <string>

namespace gpufrac {

class ProgressClock {
 public:
  ProgressClock(int total_points, bool enabled);
  void begin_point(const std::string& label);
  void end_point();
  int done() const { return done_; }

 private:
  int total_;
  bool enabled_;
  int done_ = 0;
  int64_t start_ns_;
  int64_t point_start_ns_ = 0;
  double finished_seconds_ = 0;  // sum over finished points
  std::string label_;
};

std::string format_duration(double seconds);  // 59 -> "59s", 130 -> "2m10s", 3700 -> "1h01m"

}  // namespace gpufrac
