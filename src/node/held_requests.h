// HeldRequests: the requests that wait in the router for a model with no replica to serve them
// (starting, restarting, or every replica just failed), one FIFO queue per model, each request
// until its deadline. A timer thread runs while any request waits: every kHoldTick it drops the
// requests whose client has left (`on_gone`), hands over those past their deadline
// (`on_expired`: the router answers 503), and calls `on_tick` (the router sends what it can,
// e.g. once a replica it avoided after a failure may be tried again). Callbacks run on the timer
// thread without any lock of this class held.
//
// Thread-safe. The destructor stops the thread; requests still held are dropped unanswered (the
// router's server, and with it every client connection, is gone by then).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "node/routed_request.h"

namespace gpufrac {

inline constexpr int64_t kHoldTick_ns = 50'000'000;

class HeldRequests {
 public:
  using Handler = std::function<void(const std::shared_ptr<RoutedRequest>&)>;
  HeldRequests(size_t models, Handler on_expired, Handler on_gone, std::function<void()> on_tick);
  ~HeldRequests();
  HeldRequests(const HeldRequests&) = delete;
  HeldRequests& operator=(const HeldRequests&) = delete;

  // Queues `request` behind the model's others until `deadline_ns` (CLOCK_MONOTONIC); false (and
  // nothing queued) when `limit` requests already wait for that model.
  bool hold(size_t model, std::shared_ptr<RoutedRequest> request, int64_t deadline_ns,
            size_t limit);
  // Every request waiting for `model`, in arrival order; they wait no longer.
  std::vector<std::shared_ptr<RoutedRequest>> take_all(size_t model);
  size_t waiting(size_t model) const;

 private:
  struct Held {
    std::shared_ptr<RoutedRequest> request;
    int64_t deadline_ns;
  };
  void run();

  Handler on_expired_;
  Handler on_gone_;
  std::function<void()> on_tick_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::deque<Held>> queues_;
  size_t total_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gpufrac
