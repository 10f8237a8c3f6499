// A model's admission limits at the router (models[].max_requests_in_flight and
// models[].requests_per_second): how many of its requests may be in flight at once — from the
// moment the router accepts one to its last byte, time held waiting for a replica and retries
// included — and how many it accepts per second on average (a token bucket holding
// max(1, rate) tokens, so a burst of up to one second's worth passes at once). A request over
// either limit is refused with the seconds after which to try again (Retry-After); it takes
// nothing, so it never delays the model's other requests. Retries and resumes of an accepted
// request are not admitted again: it already holds its slot.
//
// Thread-safe: admit() on the HTTP loop, release() from whichever thread ends a request.
#pragma once

#include <cstdint>
#include <mutex>

namespace gpufrac {

class AdmissionLimit {
 public:
  // 0 for either: no such limit.
  AdmissionLimit(int max_in_flight, double requests_per_second);

  enum class Verdict { kAdmitted, kTooManyInFlight, kTooFast };
  struct Decision {
    Verdict verdict = Verdict::kAdmitted;
    int retry_after_s = 0;  // whole seconds, at least 1 when refused
  };
  // `now_ns`: the monotonic clock. An admitted request holds a slot until release().
  Decision admit(int64_t now_ns);
  void release();
  int in_flight() const;

  int max_in_flight() const { return max_in_flight_; }
  double requests_per_second() const { return rate_; }

 private:
  const int max_in_flight_;
  const double rate_;
  const double burst_;
  mutable std::mutex mutex_;
  int in_flight_ = 0;
  double tokens_;
  int64_t refilled_ns_ = -1;  // when tokens_ was last brought up to date; -1: never
};

}  // namespace gpufrac
