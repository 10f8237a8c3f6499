// A small fork-join pool (the CPU runner and the weight generators use it): parallel_for() splits
// [0, count) into tasks of `grain` items that the workers (and the calling thread) take in turn,
// and returns when all are done.
//
// Contract: one parallel_for() at a time (not reentrant, not for concurrent callers). An
// exception thrown by `body` is rethrown in the caller after every task has finished (with no
// workers, or a count within one grain, at once: the caller runs the tasks in order). The
// partition never changes results: callers write disjoint outputs per item.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gpufrac {

// CPUs this process may run on (its affinity mask), at least 1.
int usable_cpu_count();

class ThreadPool {
 public:
  // `threads` counts the caller too; 0 means usable_cpu_count().
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }
  // body(begin, end) for consecutive ranges of at most `grain` items covering [0, count).
  void parallel_for(int64_t count, int64_t grain,
                    const std::function<void(int64_t begin, int64_t end)>& body);

 private:
  void worker_loop();
  void run_tasks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  uint64_t generation_ = 0;  // bumped per parallel_for; workers wait for a new one
  int busy_workers_ = 0;
  bool stopping_ = false;

  const std::function<void(int64_t, int64_t)>* body_ = nullptr;
  int64_t count_ = 0;
  int64_t grain_ = 1;
  std::atomic<int64_t> next_task_{0};
  std::exception_ptr error_;
};

}  // namespace gpufrac
