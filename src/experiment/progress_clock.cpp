#include "experiment/progress_clock.h"

#include <iomanip>
#include <iostream>
#include <sstream>

#include "common/clock.h"

namespace gpufrac {

std::string format_duration(double seconds) {
  int s = int(seconds + 0.5);
  std::ostringstream out;
  out << std::setfill('0');
  if (s >= 3600) out << s / 3600 << "h" << std::setw(2) << (s % 3600) / 60 << "m";
  else if (s >= 60) out << s / 60 << "m" << std::setw(2) << s % 60 << "s";
  else out << s << "s";
  return out.str();
}

ProgressClock::ProgressClock(int total_points, bool enabled)
    : total_(total_points), enabled_(enabled), start_ns_(monotonic_ns()) {}

void ProgressClock::begin_point(const std::string& label) {
  label_ = label;
  point_start_ns_ = monotonic_ns();
  if (!enabled_) return;
  double elapsed = double(point_start_ns_ - start_ns_) / 1e9;
  std::cerr << "[" << done_ + 1 << "/" << total_ << "] " << label << ", elapsed "
            << format_duration(elapsed);
  if (done_ > 0) {
    std::cerr << ", about " << format_duration(finished_seconds_ / done_ * (total_ - done_))
              << " left";
  }
  std::cerr << std::endl;
}

void ProgressClock::end_point() {
  double seconds = double(monotonic_ns() - point_start_ns_) / 1e9;
  finished_seconds_ += seconds;
  ++done_;
  if (enabled_) {
    std::cerr << "[" << done_ << "/" << total_ << "] " << label_ << " done in "
              << format_duration(seconds) << std::endl;
  }
}

}  // namespace gpufrac
