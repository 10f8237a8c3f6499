// Throws 20,000 malformed bodies at the request parser: it must never throw or crash, must answer
// every refusal with a 4xx and a message, and whatever it accepts must be a request the engine
// can run (non-empty prompt inside the vocabulary, within max_model_len, min <= max tokens).
#include <gtest/gtest.h>

#include <random>
#include <variant>

#include "engine/api/generation_request.h"
#include "fuzz_request_corpus.h"

namespace gpufrac::engine {
namespace {

TEST(FuzzRequestParser, TwentyThousandMalformedBodies) {
  const RequestLimits limits{"fuzz", 500, 64};
  std::mt19937 rng(20261129);
  int accepted = 0, refused = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string body = testing::fuzz_body(rng, limits.vocab_size);
    std::variant<GenerationRequest, RequestError> result;
    ASSERT_NO_THROW(result =
                        parse_generation_request(body, limits, GenerationEndpoint::kCompletions))
        << body;
    if (const RequestError* e = std::get_if<RequestError>(&result)) {
      ++refused;
      ASSERT_TRUE(e->status == 400 || e->status == 404) << body;
      ASSERT_FALSE(e->message.empty()) << body;
      continue;
    }
    ++accepted;
    const EngineRequest& r = std::get<GenerationRequest>(result).engine;
    ASSERT_FALSE(r.prompt.empty()) << body;
    for (int32_t t : r.prompt) ASSERT_TRUE(t >= 0 && t < limits.vocab_size) << body;
    for (int32_t t : r.stop.stop_token_ids) ASSERT_TRUE(t >= 0 && t < limits.vocab_size) << body;
    ASSERT_GE(r.stop.max_tokens, 1) << body;
    ASSERT_LE(int64_t(r.prompt.size()) + r.stop.max_tokens, limits.max_model_len) << body;
    ASSERT_TRUE(r.stop.min_tokens >= 0 && r.stop.min_tokens <= r.stop.max_tokens) << body;
    ASSERT_TRUE(r.temperature >= 0 && r.top_p > 0 && r.top_p <= 1 && r.top_k >= 0) << body;
  }
  EXPECT_EQ(accepted + refused, 20000);
  EXPECT_GT(refused, 15000) << "the corpus should be mostly malformed";
  EXPECT_GT(accepted, 100) << "and reach the checks behind the JSON syntax";
}

}  // namespace
}  // namespace gpufrac::engine
