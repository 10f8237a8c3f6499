#include "common/thread_pool.h"

#include <sched.h>

#include <algorithm>

namespace gpufrac {

int usable_cpu_count() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = usable_cpu_count();
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::run_tasks() {
  int64_t tasks = (count_ + grain_ - 1) / grain_;
  while (true) {
    int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= tasks) return;
    int64_t begin = task * grain_;
    try {
      (*body_)(begin, std::min(count_, begin + grain_));
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  while (true) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    run_tasks();
    {
      std::lock_guard lock(mutex_);
      --busy_workers_;
    }
    done_.notify_one();
  }
}

void ThreadPool::parallel_for(int64_t count, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& body) {
  if (count <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (workers_.empty() || count <= grain) {
    // Still a grain at a time: callers size grains to stay in cache (a tile of converted weights).
    for (int64_t begin = 0; begin < count; begin += grain)
      body(begin, std::min(count, begin + grain));
    return;
  }
  {
    std::lock_guard lock(mutex_);
    body_ = &body;
    count_ = count;
    grain_ = grain;
    next_task_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    busy_workers_ = int(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  run_tasks();
  std::exception_ptr error;
  {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return busy_workers_ == 0; });
    error = error_;
    body_ = nullptr;
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace gpufrac
