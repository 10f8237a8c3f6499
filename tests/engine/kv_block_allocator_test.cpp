#include "engine/kv_block_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "common/error.h"

namespace gpufrac::engine {
namespace {

TEST(KvBlockAllocator, GrowsTablesToCoverTokens) {
  KvBlockAllocator a(8, 16);
  std::vector<int32_t> table;
  EXPECT_TRUE(a.grow(table, 1));
  EXPECT_EQ(table.size(), 1u);
  EXPECT_TRUE(a.grow(table, 16));  // still one block
  EXPECT_EQ(table.size(), 1u);
  EXPECT_TRUE(a.grow(table, 17));
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(a.num_used_blocks(), 2);
  EXPECT_EQ(a.blocks_missing(table, 64), 2);
  EXPECT_EQ(a.blocks_missing(table, 10), 0);
}

TEST(KvBlockAllocator, RefusesWhenShortAndLeavesTableUnchanged) {
  KvBlockAllocator a(3, 4);
  std::vector<int32_t> t1, t2;
  ASSERT_TRUE(a.grow(t1, 8));
  EXPECT_FALSE(a.grow(t2, 8));
  EXPECT_TRUE(t2.empty());
  EXPECT_EQ(a.num_free_blocks(), 1);
  EXPECT_TRUE(a.grow(t2, 4));
  EXPECT_EQ(a.num_free_blocks(), 0);
}

TEST(KvBlockAllocator, ReleaseReturnsEveryBlockAndIdsAreNeverShared) {
  KvBlockAllocator a(4, 2);
  std::vector<int32_t> t1, t2;
  ASSERT_TRUE(a.grow(t1, 4));
  ASSERT_TRUE(a.grow(t2, 4));
  for (int32_t b : t1) EXPECT_EQ(std::count(t2.begin(), t2.end(), b), 0);
  a.release(t1);
  EXPECT_TRUE(t1.empty());
  EXPECT_EQ(a.num_free_blocks(), 2);
  a.release(t2);
  EXPECT_EQ(a.num_used_blocks(), 0);
}

TEST(KvBlockAllocator, DoubleReleaseIsCaught) {
  KvBlockAllocator a(2, 2);
  std::vector<int32_t> t;
  ASSERT_TRUE(a.grow(t, 2));
  std::vector<int32_t> copy = t;
  a.release(t);
  EXPECT_THROW(a.release(copy), std::logic_error);
}

TEST(KvBlockAllocator, HandsOutTheLowestFreeIdFirst) {
  KvBlockAllocator a(8, 4);
  std::vector<int32_t> x, y;
  ASSERT_TRUE(a.grow(x, 12));  // 0 1 2
  ASSERT_TRUE(a.grow(y, 8));   // 3 4
  a.release(x);
  std::vector<int32_t> z;
  ASSERT_TRUE(a.grow(z, 16));
  EXPECT_EQ(z, (std::vector<int32_t>{0, 1, 2, 5}));
  EXPECT_EQ(a.used_extent(), 6);
}

TEST(KvBlockAllocator, ElasticPoolAsksItsBackingAndGivesTheTailBack) {
  KvBlockAllocator a(16, 4, 0);  // 16 ids, none backed
  int device_limit = 8;          // what the "device" will back
  std::vector<int> asked;
  a.set_backing([&](int total) {
    asked.push_back(total);
    return std::min((total + 3) / 4 * 4, device_limit);  // chunks of 4 blocks
  });
  EXPECT_EQ(a.num_free_blocks(), 0);
  std::vector<int32_t> x;
  ASSERT_TRUE(a.grow(x, 20));  // 5 blocks: two chunks backed
  EXPECT_EQ(a.backed_blocks(), 8);
  EXPECT_EQ(asked, (std::vector<int>{5}));
  std::vector<int32_t> y;
  EXPECT_FALSE(a.grow(y, 16));  // 4 more blocks: the device has no more
  EXPECT_TRUE(y.empty());
  EXPECT_EQ(a.num_free_blocks(), 3);
  device_limit = 12;
  ASSERT_TRUE(a.grow(y, 16));
  EXPECT_EQ(a.backed_blocks(), 12);
  EXPECT_THROW(a.shrink_backed(4), std::logic_error);  // y holds blocks 5..8
  a.release(y);
  EXPECT_EQ(a.used_extent(), 5);
  a.shrink_backed(8);
  EXPECT_EQ(a.backed_blocks(), 8);
  EXPECT_EQ(a.num_free_blocks(), 3);
  a.release(x);
  a.shrink_backed(0);
  EXPECT_EQ(a.backed_blocks(), 0);
  EXPECT_EQ(a.num_free_blocks(), 0);
}

TEST(KvMemoryBudget, BytesOrAutoMinusMargin) {
  EXPECT_EQ(resolve_kv_memory_budget("1G", 0), uint64_t(1) << 30);
  uint64_t available = uint64_t(80) << 30;
  EXPECT_EQ(resolve_kv_memory_budget("auto", available), available - auto_budget_margin(available));
  EXPECT_LT(resolve_kv_memory_budget("auto", available), available);
  try {
    resolve_kv_memory_budget("auto", uint64_t(100) << 20);
    FAIL() << "no exception";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--memory-budget"), std::string::npos);
  }
  EXPECT_THROW(resolve_kv_memory_budget("lots", 0), UsageError);
}

TEST(KvMemoryBudget, PoolIsWhatFitsCappedAtWhatCanBeUsed) {
  // 1 MiB blocks, 100 MiB budget: 100 blocks fit.
  EXPECT_EQ(kv_pool_blocks(100 << 20, 1 << 20, 16, 160, 256), 100);
  // 2 sequences of 160 tokens need 20 blocks: no more are made.
  EXPECT_EQ(kv_pool_blocks(100 << 20, 1 << 20, 16, 160, 2), 20);
  try {
    kv_pool_blocks(5 << 20, 1 << 20, 16, 160, 2);  // 5 blocks < 10 for one sequence
    FAIL() << "no exception";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-model-len"), std::string::npos);
  }
}

}  // namespace
}  // namespace gpufrac::engine
