#include "memcap/allocation_table.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

namespace gpufrac::memcap {
namespace {

TEST(AllocationTable, InsertFindErase) {
  AllocationTable table;
  EXPECT_EQ(table.find(42), nullptr);
  ASSERT_TRUE(table.reserve_one());
  bool existed = true;
  AllocationRecord* record = table.insert(42, &existed);
  EXPECT_FALSE(existed);
  record->bytes = 7;
  ASSERT_TRUE(table.reserve_one());
  EXPECT_EQ(table.insert(42, &existed)->bytes, 7u);
  EXPECT_TRUE(existed);
  EXPECT_EQ(table.size(), 1u);
  table.erase(42);
  EXPECT_EQ(table.find(42), nullptr);
  EXPECT_EQ(table.size(), 0u);
}

// Random inserts and erases (with keys that collide in the low bits, as aligned device pointers
// do) against std::unordered_map: backward-shift deletion must never lose a record.
TEST(AllocationTable, MatchesAReferenceMapUnderRandomOperations) {
  AllocationTable table;
  std::unordered_map<uint64_t, uint64_t> reference;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    uint64_t key = ((rng() % 5000) + 1) << 21;
    if (rng() % 3 == 0) {
      table.erase(key);
      reference.erase(key);
    } else {
      ASSERT_TRUE(table.reserve_one());
      bool existed = false;
      table.insert(key, &existed)->bytes = key / 3;
      EXPECT_EQ(existed, reference.count(key) == 1);
      reference[key] = key / 3;
    }
  }
  ASSERT_EQ(table.size(), reference.size());
  for (const auto& [key, bytes] : reference) {
    AllocationRecord* record = table.find(key);
    ASSERT_NE(record, nullptr) << key;
    EXPECT_EQ(record->bytes, bytes);
  }
  size_t visited = 0;
  table.for_each([&](const AllocationRecord& record) {
    ++visited;
    EXPECT_EQ(reference.count(record.key), 1u);
  });
  EXPECT_EQ(visited, reference.size());
  table.clear();
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.find(reference.begin()->first), nullptr);
}

}  // namespace
}  // namespace gpufrac::memcap
