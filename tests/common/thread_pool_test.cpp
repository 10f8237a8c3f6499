// The fork-join pool: every item of [0, count) is covered once, in ranges of at most `grain`
// items, whatever the thread count (one thread included: callers size grains to fit in cache);
// an exception of the body reaches the caller.
#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

namespace gpufrac {
namespace {

std::vector<std::pair<int64_t, int64_t>> ranges_of(int threads, int64_t count, int64_t grain) {
  ThreadPool pool(threads);
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  pool.parallel_for(count, grain, [&](int64_t begin, int64_t end) {
    std::lock_guard lock(mutex);
    ranges.emplace_back(begin, end);
  });
  std::sort(ranges.begin(), ranges.end());
  return ranges;
}

TEST(ThreadPool, CoversEveryItemOnceInRangesOfAtMostTheGrain) {
  for (int threads : {1, 2, 3}) {
    std::vector<std::pair<int64_t, int64_t>> ranges = ranges_of(threads, 1000, 64);
    ASSERT_FALSE(ranges.empty());
    int64_t next = 0;
    for (const auto& [begin, end] : ranges) {
      EXPECT_EQ(begin, next) << threads << " thread(s)";
      EXPECT_GT(end, begin);
      EXPECT_LE(end - begin, 64) << threads << " thread(s)";
      next = end;
    }
    EXPECT_EQ(next, 1000) << threads << " thread(s)";
  }
}

TEST(ThreadPool, ACountWithinOneGrainIsOneRange) {
  EXPECT_EQ(ranges_of(2, 10, 64), (std::vector<std::pair<int64_t, int64_t>>{{0, 10}}));
  EXPECT_TRUE(ranges_of(2, 0, 64).empty());
}

TEST(ThreadPool, TheBodysExceptionReachesTheCaller) {
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    EXPECT_THROW(pool.parallel_for(100, 10,
                                   [](int64_t begin, int64_t) {
                                     if (begin == 50) throw std::runtime_error("task 5");
                                   }),
                 std::runtime_error);
  }
}

}  // namespace
}  // namespace gpufrac
