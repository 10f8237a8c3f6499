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

}  // namespace
}  // namespace gpufrac::memcap
