// Unit tests of find_qwen3_tokenizer_dir: the environment override, and the installed npm data.
#include "engine/tokenizer/tokenizer_location.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "common/error.h"
#include "tokenizer_test_support.h"

namespace gpufrac::engine {
namespace {

class TokenizerLocation : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv("GPUFRAC_TOKENIZER_DIR"); }
  void TearDown() override { unsetenv("GPUFRAC_TOKENIZER_DIR"); }
};

TEST_F(TokenizerLocation, FindsTheInstalledQwen3Data) {
  const std::string dir = find_qwen3_tokenizer_dir();
  EXPECT_TRUE(std::filesystem::exists(dir + "/tokenizer.json")) << dir;
  EXPECT_TRUE(std::filesystem::exists(dir + "/tokenizer_config.json")) << dir;
  EXPECT_NE(dir.find("tokenizer-qwen3"), std::string::npos) << dir;
}

TEST_F(TokenizerLocation, EnvironmentOverrideWins) {
  const std::string other = test_util::npm_package_dir("tokenizer-llama3") + "/models";
  setenv("GPUFRAC_TOKENIZER_DIR", other.c_str(), 1);
  EXPECT_EQ(find_qwen3_tokenizer_dir(), other);
}

TEST_F(TokenizerLocation, OverrideWithoutTokenizerJsonIsAUsageError) {
  setenv("GPUFRAC_TOKENIZER_DIR", "/nonexistent/dir", 1);
  try {
    find_qwen3_tokenizer_dir();
    ADD_FAILURE() << "accepted a directory without tokenizer.json";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("GPUFRAC_TOKENIZER_DIR=/nonexistent/dir"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace gpufrac::engine
