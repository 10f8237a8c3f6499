#include "memcap/memcap_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "common/error.h"
#include "common/strings.h"

namespace gpufrac::memcap {
namespace {

struct Parsed {
  bool ok;
  MemcapConfig config;
  std::string error;
};

Parsed parse(const char* bytes, const char* tenant = nullptr, const char* state_dir = nullptr) {
  Parsed parsed;
  char error[1024];
  parsed.ok =
      parse_memcap_config(bytes, tenant, state_dir, nullptr, &parsed.config, error, sizeof error);
  parsed.error = error;
  return parsed;
}

TEST(MemcapConfig, NoCapWhenUnsetOrEmpty) {
  EXPECT_FALSE(parse(nullptr).config.enabled);
  EXPECT_FALSE(parse("").config.enabled);
  EXPECT_TRUE(parse(nullptr).ok);
}

TEST(MemcapConfig, OneSizeCapsEveryDevice) {
  Parsed p = parse("10G");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_TRUE(p.config.enabled);
  EXPECT_TRUE(p.config.one_cap_for_all);
  for (int d = 0; d < kMaxDevices; ++d) {
    EXPECT_TRUE(p.config.device_capped[d]);
    EXPECT_EQ(p.config.cap_bytes[d], 10ull << 30);
  }
}

TEST(MemcapConfig, PerDeviceCapsOnlyListedDevices) {
  Parsed p = parse("0=10G, 3=512M");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_FALSE(p.config.one_cap_for_all);
  EXPECT_EQ(p.config.cap_bytes[0], 10ull << 30);
  EXPECT_EQ(p.config.cap_bytes[3], 512ull << 20);
  EXPECT_TRUE(p.config.device_capped[3]);
  EXPECT_FALSE(p.config.device_capped[1]);
}

TEST(MemcapConfig, BadCapsNameTheVariableAndTheFix) {
  for (const char* bad :
       {"abc", "10X", "0=", "=5G", "0=5G,", "0=5G,0=6G", "32=1G", "0=1G,x=2G", "20T"}) {
    Parsed p = parse(bad);
    EXPECT_FALSE(p.ok) << bad;
    EXPECT_NE(p.error.find("GPUFRAC_MEMCAP_BYTES"), std::string::npos) << p.error;
    EXPECT_NE(p.error.find(bad), std::string::npos) << p.error;
  }
  EXPECT_NE(parse("0=5G,0=6G").error.find("listed twice"), std::string::npos);
}

TEST(MemcapConfig, TenantDefaultsAndIsValidated) {
  EXPECT_STREQ(parse("1G").config.tenant, "default");
  EXPECT_STREQ(parse("1G", "qwen3-4b.v1_a").config.tenant, "qwen3-4b.v1_a");
  const std::string too_long(65, 'x');
  for (const char* bad : {"a/b", "..", ".hidden", "has space", too_long.c_str()}) {
    Parsed p = parse("1G", bad);
    EXPECT_FALSE(p.ok) << bad;
    EXPECT_NE(p.error.find("GPUFRAC_MEMCAP_TENANT"), std::string::npos) << p.error;
  }
}

TEST(MemcapConfig, StateDirDefaultsPerUserAndMustBeAbsolute) {
  std::string expected = "/dev/shm/gpufrac-memcap-" + std::to_string(getuid());
  EXPECT_EQ(std::string(parse("1G").config.state_dir), expected);
  EXPECT_EQ(std::string(parse("1G", nullptr, "/var/run/x").config.state_dir), "/var/run/x");
  Parsed relative = parse("1G", nullptr, "relative/dir");
  EXPECT_FALSE(relative.ok);
  EXPECT_NE(relative.error.find("GPUFRAC_MEMCAP_STATE_DIR"), std::string::npos);
}

// The shim cannot link gpufrac_common, so it has its own size parser: it must read every size the
// rest of gpufrac reads, the same way.
TEST(MemcapConfig, SizesReadLikeTheRestOfGpufrac) {
  for (const char* text : {"0", "1", "1073741824", "512M", "512m", "10G", "10GiB", "10GB", "10 G",
                           "1.5G", "1.5GiB", " 3K ", "2T", "19968M", "7b", "0.5K"}) {
    uint64_t bytes = 0;
    ASSERT_TRUE(parse_byte_size(text, strlen(text), &bytes)) << text;
    EXPECT_EQ(bytes, parse_bytes(text, "size")) << text;
  }
  for (const char* text : {"", "G", "abc", "10X", "10GG", "-1", "1e3"}) {
    uint64_t bytes = 0;
    EXPECT_FALSE(parse_byte_size(text, strlen(text), &bytes)) << text;
    EXPECT_THROW(parse_bytes(text, "size"), UsageError) << text;
  }
}

Parsed parse_pool(const char* bytes, const char* floor, const char* pool_bytes,
                  const char* pool = nullptr) {
  Parsed parsed = parse(bytes);
  char error[1024] = "";
  parsed.ok =
      parsed.ok && parse_memcap_pool(floor, pool_bytes, pool, &parsed.config, error, sizeof error);
  parsed.error = error;
  return parsed;
}

TEST(MemcapConfig, NoPoolUnlessAsked) {
  Parsed p = parse_pool("10G", nullptr, nullptr);
  ASSERT_TRUE(p.ok) << p.error;
  for (int d = 0; d < kMaxDevices; ++d) EXPECT_FALSE(p.config.device_pooled[d]);
  EXPECT_FALSE(parse_pool(nullptr, nullptr, "").config.enabled);
}

TEST(MemcapConfig, APoolAppliesWhereThereIsACeiling) {
  Parsed p = parse_pool("0=40G,2=20G", "9G", "80G");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_TRUE(p.config.device_pooled[0]);
  EXPECT_FALSE(p.config.device_pooled[1]);  // no ceiling: not pooled
  EXPECT_TRUE(p.config.device_pooled[2]);
  EXPECT_EQ(p.config.pool_bytes[0], 80ull << 30);
  EXPECT_EQ(p.config.floor_bytes[2], 9ull << 30);
  EXPECT_STREQ(p.config.pool, "gpu");

  p = parse_pool("40G", "0=9G", "0=80G,1=70G", "node-a");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.config.pool_bytes[1], 70ull << 30);
  EXPECT_EQ(p.config.floor_bytes[1], 0u);  // no floor given for device 1
  EXPECT_FALSE(p.config.device_pooled[2]);
  EXPECT_STREQ(p.config.pool, "node-a");
}

TEST(MemcapConfig, BadPoolsNameTheVariableAndTheFix) {
  struct Case {
    const char* bytes;
    const char* floor;
    const char* pool_bytes;
    const char* pool;
    const char* expected;
  };
  for (const Case& c : {
           Case{"40G", "9G", nullptr, nullptr,
                "GPUFRAC_MEMCAP_FLOOR_BYTES is set but "
                "GPUFRAC_MEMCAP_POOL_BYTES is not"},
           Case{"40G", nullptr, nullptr, "a", "GPUFRAC_MEMCAP_POOL is set but"},
           Case{nullptr, nullptr, "80G", nullptr, "a pooled tenant needs a ceiling"},
           Case{"0=40G", nullptr, "1=80G", nullptr, "gives device 1 a pool but"},
           Case{"0=40G,1=40G", "1=9G", "0=80G", nullptr, "gives device 1 a floor but"},
           Case{"40G", "50G", "80G", nullptr, "is above its ceiling"},
           Case{"40G", "9G", "8G", nullptr, "is above its pool"},
           Case{"40G", "9G", "lots", nullptr, "GPUFRAC_MEMCAP_POOL_BYTES='lots' is not a size"},
           Case{"40G", "0=9G,0=9G", "80G", nullptr, "listed twice"},
           Case{"40G", nullptr, "80G", "no/slash", "is not a pool name"},
       }) {
    Parsed p = parse_pool(c.bytes, c.floor, c.pool_bytes, c.pool);
    EXPECT_FALSE(p.ok) << c.expected;
    EXPECT_TRUE(p.config.enabled) << c.expected;  // so the shim refuses rather than runs without
    EXPECT_NE(p.error.find(c.expected), std::string::npos) << p.error;
  }
}

}  // namespace
}  // namespace gpufrac::memcap
