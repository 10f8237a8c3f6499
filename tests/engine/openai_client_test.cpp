// The official OpenAI JavaScript client against `gpufrac serve --model tiny --device cpu` as a
// process: openai_client_test.js streams a chat completion and a text completion (and their
// non-streamed twins, a stop string, the sampling fields — n, logprobs, seed, penalties,
// logit_bias, echo, ... — the model list and the errors) and asserts the fields of the objects
// the client parses. The server runs with --api-key k1 and the client with apiKey "k1" (and a
// client with another key gets AuthenticationError). Needs node and the pinned `openai` package
// (scripts/install-deps).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "engine/tokenizer/tokenizer_test_support.h"
#include "serve_process.h"

namespace gpufrac::testing {
namespace {

using namespace std::chrono_literals;

std::string openai_package_dir() {
  const char* data = std::getenv("GPUFRAC_DATA_DIR");
  const std::string base =
      data && *data ? std::string(data) : engine::test_util::source_dir() + "/third_party";
  return base + "/npm/openai/node_modules/openai";
}

TEST(OpenAiClient, StreamsChatAndTextCompletionsFromServeTiny) {
  const std::string package = openai_package_dir();
  ASSERT_TRUE(std::filesystem::exists(package + "/package.json"))
      << package << " is missing: run scripts/install-deps";
  int port = free_port();
  ServeProcess serve({"--model", "tiny", "--device", "cpu", "--port", std::to_string(port),
                      "--max-model-len", "1024", "--memory-budget", "64M", "--threads", "2",
                      "--api-key", "k1"});
  ASSERT_TRUE(serve.wait_healthy(port, 120s)) << serve.log();
  engine::test_util::run_checked("node '" + engine::test_util::source_dir() +
                                 "/tests/engine/openai_client_test.js' '" + package +
                                 "' http://127.0.0.1:" + std::to_string(port) + " tiny k1");
  EXPECT_EQ(serve.terminate(), 0) << serve.log();
}

}  // namespace
}  // namespace gpufrac::testing
