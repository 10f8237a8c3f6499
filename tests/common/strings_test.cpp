#include "common/strings.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace gpufrac {
namespace {

TEST(ParseBytes, UnitsArePowersOf1024) {
  EXPECT_EQ(parse_bytes("1073741824", "x"), 1073741824u);
  EXPECT_EQ(parse_bytes("19968M", "x"), 19968ull << 20);
  EXPECT_EQ(parse_bytes("10G", "x"), 10ull << 30);
  EXPECT_EQ(parse_bytes("1.5GiB", "x"), 3ull << 29);
  EXPECT_EQ(parse_bytes("2kb", "x"), 2048u);
}

TEST(ParseBytes, RejectsGarbageNamingTheField) {
  try {
    parse_bytes("ten gigs", "memory");
    FAIL() << "no exception";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("memory"), std::string::npos);
  }
  EXPECT_THROW(parse_bytes("10X", "m"), UsageError);
}

TEST(ParseLists, IntegersAndDoubles) {
  EXPECT_EQ(parse_int_list("1,2,4,8", "c"), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(parse_double_list("0.1, 0.5", "r"), (std::vector<double>{0.1, 0.5}));
  EXPECT_THROW(parse_int_list("1,,2", "c"), UsageError);
  EXPECT_THROW(parse_int("3.5", "c"), UsageError);
}

TEST(ParseSeconds, Units) {
  EXPECT_DOUBLE_EQ(parse_seconds("250ms", "t"), 0.25);
  EXPECT_DOUBLE_EQ(parse_seconds("30", "t"), 30);
  EXPECT_DOUBLE_EQ(parse_seconds("2m", "t"), 120);
  EXPECT_THROW(parse_seconds("fast", "t"), UsageError);
}

TEST(FormatIntRanges, CollapsesRunsOfConsecutiveIntegers) {
  EXPECT_EQ(format_int_ranges({}), "");
  EXPECT_EQ(format_int_ranges({3}), "3");
  EXPECT_EQ(format_int_ranges({1, 2, 3, 4, 8}), "1-4,8");
  EXPECT_EQ(format_int_ranges({1, 3, 4, 6, 7, 8}), "1,3-4,6-8");
}

TEST(FormatBytes, ReadableUnits) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(10ull << 30), "10 GiB");
}

}  // namespace
}  // namespace gpufrac
