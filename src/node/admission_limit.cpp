#include "node/admission_limit.h"

#include <algorithm>
#include <cmath>

namespace gpufrac {

AdmissionLimit::AdmissionLimit(int max_in_flight, double requests_per_second)
    : max_in_flight_(max_in_flight),
      rate_(requests_per_second),
      burst_(std::max(1.0, requests_per_second)),
      tokens_(burst_) {}

AdmissionLimit::Decision AdmissionLimit::admit(int64_t now_ns) {
  std::lock_guard lock(mutex_);
  if (max_in_flight_ > 0 && in_flight_ >= max_in_flight_) {
    // A slot frees when a request ends, which the router cannot foresee: ask again in a second.
    return {Verdict::kTooManyInFlight, 1};
  }
  if (rate_ > 0) {
    if (refilled_ns_ >= 0) {
      tokens_ = std::min(burst_, tokens_ + double(now_ns - refilled_ns_) * 1e-9 * rate_);
    }
    refilled_ns_ = now_ns;
    if (tokens_ < 1) {
      double wait_s = (1 - tokens_) / rate_;
      return {Verdict::kTooFast, std::max(1, int(std::ceil(wait_s)))};
    }
    tokens_ -= 1;
  }
  in_flight_++;
  return {};
}

void AdmissionLimit::release() {
  std::lock_guard lock(mutex_);
  if (in_flight_ > 0) in_flight_--;
}

int AdmissionLimit::in_flight() const {
  std::lock_guard lock(mutex_);
  return in_flight_;
}

}  // namespace gpufrac
