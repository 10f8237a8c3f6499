#include "node/held_requests.h"

#include "common/clock.h"

namespace gpufrac {

HeldRequests::HeldRequests(size_t models, Handler on_expired, Handler on_gone,
                           std::function<void()> on_tick)
    : on_expired_(std::move(on_expired)),
      on_gone_(std::move(on_gone)),
      on_tick_(std::move(on_tick)),
      queues_(models),
      thread_([this] { run(); }) {}

HeldRequests::~HeldRequests() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

bool HeldRequests::hold(size_t model, std::shared_ptr<RoutedRequest> request, int64_t deadline_ns,
                        size_t limit) {
  {
    std::lock_guard lock(mutex_);
    if (queues_[model].size() >= limit) return false;
    queues_[model].push_back({std::move(request), deadline_ns});
    ++total_;
  }
  wake_.notify_all();
  return true;
}

std::vector<std::shared_ptr<RoutedRequest>> HeldRequests::take_all(size_t model) {
  std::vector<std::shared_ptr<RoutedRequest>> taken;
  std::lock_guard lock(mutex_);
  for (Held& held : queues_[model]) taken.push_back(std::move(held.request));
  total_ -= queues_[model].size();
  queues_[model].clear();
  return taken;
}

size_t HeldRequests::waiting(size_t model) const {
  std::lock_guard lock(mutex_);
  return queues_[model].size();
}

void HeldRequests::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || total_ > 0; });
    if (stop_) return;
    wake_.wait_for(lock, std::chrono::nanoseconds(kHoldTick_ns), [&] { return stop_; });
    if (stop_) return;
    int64_t now = monotonic_ns();
    std::vector<std::shared_ptr<RoutedRequest>> expired, gone;
    for (std::deque<Held>& queue : queues_) {
      for (auto it = queue.begin(); it != queue.end();) {
        bool left = it->request->client_gone();
        if (!left && it->deadline_ns > now) {
          ++it;
          continue;
        }
        (left ? gone : expired).push_back(std::move(it->request));
        it = queue.erase(it);
        --total_;
      }
    }
    lock.unlock();
    for (const auto& request : gone) on_gone_(request);
    for (const auto& request : expired) on_expired_(request);
    on_tick_();
    lock.lock();
  }
}

}  // namespace gpufrac
