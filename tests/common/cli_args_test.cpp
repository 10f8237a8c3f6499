#include "common/cli_args.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace gpufrac {
namespace {

bool parse(CliArgs& args, std::vector<std::string> words) {
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return args.parse(int(argv.size()), argv.data());
}

CliArgs make() {
  CliArgs args("gpufrac demo [OPTIONS]", "A demo.");
  args.option("port", "PORT", "Port to listen on.", "8000")
      .option("target", "URL", "Endpoint.", std::nullopt, true)
      .option("model", "NAME", "Model.")
      .flag("verbose", "Say more.")
      .allow_passthrough("Command to run.");
  return args;
}

TEST(CliArgs, ValuesDefaultsFlagsAndPassthrough) {
  CliArgs args = make();
  ASSERT_TRUE(parse(args, {"demo", "--target", "a", "--target=b", "--verbose", "--", "ls", "-l"}));
  EXPECT_EQ(args.get("port"), "8000");
  EXPECT_FALSE(args.given("port"));
  EXPECT_EQ(args.get_all("target"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(args.flag_set("verbose"));
  EXPECT_EQ(args.passthrough(), (std::vector<std::string>{"ls", "-l"}));
  EXPECT_THROW(args.get("model"), UsageError);
}

TEST(CliArgs, ErrorsNameTheOption) {
  CliArgs a = make();
  EXPECT_THROW(parse(a, {"demo", "--nope"}), UsageError);
  CliArgs b = make();
  EXPECT_THROW(parse(b, {"demo", "--port"}), UsageError);
  CliArgs c = make();
  EXPECT_THROW(parse(c, {"demo", "--port", "1", "--port", "2"}), UsageError);
  CliArgs d = make();
  EXPECT_THROW(parse(d, {"demo", "stray"}), UsageError);
}

TEST(CliArgs, HelpListsEveryOptionAndReturnsFalse) {
  CliArgs args = make();
  testing::internal::CaptureStdout();
  EXPECT_FALSE(parse(args, {"demo", "--help"}));
  std::string out = testing::internal::GetCapturedStdout();
  for (const char* word : {"--port PORT", "--target URL", "--verbose", "[default: 8000]"}) {
    EXPECT_NE(out.find(word), std::string::npos) << word;
  }
}

}  // namespace
}  // namespace gpufrac
