#include "common/api_key.h"

#include <gtest/gtest.h>

#include <set>

#include "common/error.h"

namespace gpufrac {
namespace {

TEST(ApiKey, BearerTokenTakesTheSchemeInAnyCaseAndNothingElse) {
  EXPECT_EQ(bearer_token("Bearer k1"), "k1");
  EXPECT_EQ(bearer_token("bearer  k1 "), "k1");
  EXPECT_EQ(bearer_token("BEARER\tk1"), "k1");
  EXPECT_EQ(bearer_token(""), "");
  EXPECT_EQ(bearer_token("Bearer"), "");
  EXPECT_EQ(bearer_token("Bearer "), "");
  EXPECT_EQ(bearer_token("Bearerk1"), "");
  EXPECT_EQ(bearer_token("Basic azE6"), "");
  EXPECT_EQ(bearer_token("k1"), "");
}

TEST(ApiKey, KeysEqualOnlyWhenEveryByteAndTheLengthMatch) {
  EXPECT_TRUE(keys_equal("secret", "secret"));
  EXPECT_FALSE(keys_equal("secreT", "secret"));
  EXPECT_FALSE(keys_equal("secre", "secret"));
  EXPECT_FALSE(keys_equal("secrets", "secret"));
  EXPECT_FALSE(keys_equal("", "secret"));
  // A presented key that is the real one followed by a NUL byte is not the key.
  EXPECT_FALSE(keys_equal(std::string_view("secret\0", 7), "secret"));
}

TEST(ApiKey, TableFindsTheOwnersOfAKeyAddedForSeveralOfThem) {
  ApiKeyTable table;
  EXPECT_TRUE(table.empty());
  table.add("ka", 0);
  table.add("kb", 1);
  table.add("shared", 0);
  table.add("shared", 1);
  table.add("shared", 1);  // once is enough
  EXPECT_EQ(table.size(), 3u);
  ASSERT_NE(table.find("ka"), nullptr);
  EXPECT_EQ(*table.find("ka"), std::vector<size_t>({0}));
  EXPECT_EQ(*table.find("kb"), std::vector<size_t>({1}));
  EXPECT_EQ(*table.find("shared"), std::vector<size_t>({0, 1}));
  EXPECT_EQ(table.find("kc"), nullptr);
  EXPECT_EQ(table.find(""), nullptr);
  EXPECT_EQ(table.find("k"), nullptr);
}

TEST(ApiKey, ListsSplitOnCommasAndWhitespaceAndSkipComments) {
  EXPECT_EQ(parse_api_keys("ka", "X"), std::vector<std::string>({"ka"}));
  EXPECT_EQ(parse_api_keys(" ka, kb\tkc\n\n# a comment, not-a-key\nkd\r\n", "X"),
            std::vector<std::string>({"ka", "kb", "kc", "kd"}));
  EXPECT_TRUE(parse_api_keys("", "X").empty());
  EXPECT_TRUE(parse_api_keys(" ,\n# only a comment\n", "X").empty());
}

TEST(ApiKey, ABadKeyIsNamedByItsPositionNeverByItsText) {
  try {
    parse_api_keys("good1,bad\x01secret", "keys.txt");
    FAIL() << "a control character was accepted";
  } catch (const UsageError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("keys.txt: key 2"), std::string::npos) << message;
    EXPECT_EQ(message.find("secret"), std::string::npos) << message;
    EXPECT_EQ(message.find("bad"), std::string::npos) << message;
  }
  EXPECT_THROW(check_api_key("", "--api-key"), UsageError);
  EXPECT_THROW(check_api_key(std::string(513, 'k'), "--api-key"), UsageError);
  EXPECT_THROW(check_api_key("caf\xc3\xa9", "--api-key"), UsageError);
  EXPECT_THROW(check_api_key("a,b", "--api-key"), UsageError);
  EXPECT_NO_THROW(check_api_key(std::string(512, 'k'), "--api-key"));
  EXPECT_NO_THROW(check_api_key("sk-proj_AZaz09.~!@#$%^&*()", "--api-key"));
}

TEST(ApiKey, RandomKeysAre64HexDigitsAndDiffer) {
  std::set<std::string> seen;
  for (int i = 0; i < 16; ++i) {
    std::string key = random_api_key();
    EXPECT_EQ(key.size(), 64u);
    EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos) << key;
    EXPECT_NO_THROW(check_api_key(key, "random"));
    seen.insert(key);
  }
  EXPECT_EQ(seen.size(), 16u);
}

}  // namespace
}  // namespace gpufrac
