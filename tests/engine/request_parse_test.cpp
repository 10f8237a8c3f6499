#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "engine/api/generation_request.h"

namespace gpufrac::engine {
namespace {

const RequestLimits kLimits{"tiny", 1000, 64};

GenerationRequest ok(const std::string& body) {
  auto r = parse_generation_request(body, kLimits, GenerationEndpoint::kCompletions);
  if (auto* e = std::get_if<RequestError>(&r)) {
    ADD_FAILURE() << body << " -> " << e->status << " " << e->message;
    return {};
  }
  return std::get<GenerationRequest>(r);
}

RequestError error(const std::string& body) {
  auto r = parse_generation_request(body, kLimits, GenerationEndpoint::kCompletions);
  if (!std::holds_alternative<RequestError>(r)) {
    ADD_FAILURE() << body << " was accepted";
    return {};
  }
  return std::get<RequestError>(r);
}

TEST(RequestParse, TokenIdPromptsWithDefaults) {
  GenerationRequest r = ok(R"({"model":"tiny","prompt":[1,2,3]})");
  EXPECT_EQ(r.engine.prompt, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.engine.stop.max_tokens, 16);
  EXPECT_EQ(r.engine.temperature, 1.0f);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.engine.seed.has_value());
  EXPECT_EQ(ok(R"({"prompt":[[5,6]]})").engine.prompt, (std::vector<int32_t>{5, 6}));
  // Default max_tokens shrinks to fit max_model_len (64).
  std::string long_prompt = "[";
  for (int i = 0; i < 60; ++i) long_prompt += std::to_string(i) + (i < 59 ? "," : "]");
  EXPECT_EQ(ok(R"({"prompt":)" + long_prompt + "}").engine.stop.max_tokens, 4);
}

TEST(RequestParse, EveryKnownField) {
  GenerationRequest r = ok(R"({"model":"tiny","prompt":[7],"max_tokens":10,"min_tokens":3,
      "temperature":0.5,"top_p":0.9,"top_k":40,"seed":-5,"ignore_eos":true,
      "stop_token_ids":[4,9],"stream":true,"stream_options":{"include_usage":true},
      "n":1,"best_of":null,"echo":false,"logprobs":null,"presence_penalty":0,"stop":[],
      "user":"someone","unknown_extra":{"x":[1]}})");
  EXPECT_EQ(r.engine.stop.max_tokens, 10);
  EXPECT_EQ(r.engine.stop.min_tokens, 3);
  EXPECT_FLOAT_EQ(r.engine.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.engine.top_p, 0.9f);
  EXPECT_EQ(r.engine.top_k, 40);
  EXPECT_EQ(r.engine.seed, uint64_t(int64_t(-5)));
  EXPECT_TRUE(r.engine.stop.ignore_eos);
  EXPECT_EQ(r.engine.stop.stop_token_ids, (std::vector<int32_t>{4, 9}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(ok(R"({"prompt":[7],"top_k":-1})").engine.top_k, 0);
}

TEST(RequestParse, PenaltiesMinPAndLogitBias) {
  GenerationRequest r = ok(R"({"prompt":[7],"presence_penalty":0.5,"frequency_penalty":-1.5,
      "repetition_penalty":1.3,"min_p":0.05,"logit_bias":{"3":-100,"42":2.5},
      "max_completion_tokens":5,"max_tokens":9})");
  EXPECT_FLOAT_EQ(r.engine.penalties.presence, 0.5f);
  EXPECT_FLOAT_EQ(r.engine.penalties.frequency, -1.5f);
  EXPECT_FLOAT_EQ(r.engine.penalties.repetition, 1.3f);
  EXPECT_FLOAT_EQ(r.engine.min_p, 0.05f);
  ASSERT_EQ(r.engine.logit_bias.size(), 2u);
  EXPECT_EQ(r.engine.logit_bias[0].id, 3);
  EXPECT_EQ(r.engine.logit_bias[0].bias, -100.0f);
  EXPECT_EQ(r.engine.logit_bias[1].id, 42);
  EXPECT_EQ(r.engine.logit_bias[1].bias, 2.5f);
  EXPECT_EQ(r.engine.stop.max_tokens, 5) << "max_completion_tokens comes before max_tokens";
  GenerationRequest neutral = ok(R"({"prompt":[7],"presence_penalty":0,"frequency_penalty":0,
      "repetition_penalty":1,"min_p":0,"logit_bias":{}})");
  EXPECT_FALSE(neutral.engine.penalties.active());
  EXPECT_TRUE(neutral.engine.logit_bias.empty());
  EXPECT_EQ(neutral.engine.min_p, 0.0f);
  EXPECT_EQ(neutral.engine.logprobs, -1);
  EXPECT_EQ(ok(R"({"prompt":[7],"logprobs":2})").engine.logprobs, 2);
  EXPECT_EQ(ok(R"({"prompt":[7],"logprobs":0})").engine.logprobs, 0);
  EXPECT_EQ(neutral.engine.n, 1);
  EXPECT_EQ(ok(R"({"prompt":[7],"n":3,"best_of":3})").engine.n, 3);
  EXPECT_EQ(ok(R"({"prompt":[7,42],"echo":true})").echo_text, " 7 42") << "ids as generated ids";
  EXPECT_EQ(ok(R"({"prompt":[7,42],"echo":false})").echo_text, "");
}

TEST(RequestParse, ErrorsNameTheFieldAndStatus) {
  struct Case {
    std::string body;
    int status;
    std::string param;
    std::string says;
  };
  const Case cases[] = {
      {"{not json", 400, "", "not valid JSON"},
      {"[1,2]", 400, "", "JSON object"},
      {R"({"model":"other","prompt":[1]})", 404, "model", "does not exist"},
      {R"({"model":7,"prompt":[1]})", 400, "model", "string"},
      {R"({"max_tokens":3})", 400, "prompt", "required"},
      {R"({"prompt":"hello"})", 400, "prompt", "tokenizer"},
      {R"({"prompt":["hello"]})", 400, "prompt", "tokenizer"},
      {R"({"prompt":[[1],[2]]})", 400, "prompt", "one prompt per request"},
      {R"({"prompt":[]})", 400, "prompt", "empty"},
      {R"({"prompt":[[]]})", 400, "prompt", "empty"},
      {R"({"prompt":[1,"2"]})", 400, "prompt", "prompt[1]"},
      {R"({"prompt":[1,2.5]})", 400, "prompt", "integer"},
      {R"({"prompt":[1000]})", 400, "prompt", "outside the vocabulary"},
      {R"({"prompt":[-1]})", 400, "prompt", "outside the vocabulary"},
      {R"({"prompt":[18446744073709551615]})", 400, "prompt", "outside the vocabulary"},
      {R"({"prompt":{"a":1}})", 400, "prompt", "array of token ids"},
      {R"({"prompt":[1],"max_tokens":64})", 400, "max_tokens", "maximum context length is 64"},
      {R"({"prompt":[1],"max_tokens":0})", 400, "max_tokens", "between 1"},
      {R"({"prompt":[1],"max_tokens":"5"})", 400, "max_tokens", "integer"},
      {R"({"prompt":[1],"max_tokens":1e3})", 400, "max_tokens", "integer"},
      {R"({"prompt":[1],"max_tokens":99999999999999999999})", 400, "max_tokens", ""},
      {R"({"prompt":[1],"max_tokens":4,"min_tokens":5})", 400, "min_tokens", "between 0 and 4"},
      {R"({"prompt":[1],"temperature":-1})", 400, "temperature", ""},
      {R"({"prompt":[1],"temperature":"hot"})", 400, "temperature", "number"},
      {R"({"prompt":[1],"top_p":0})", 400, "top_p", ""},
      {R"({"prompt":[1],"top_k":1.5})", 400, "top_k", "integer"},
      {R"({"prompt":[1],"seed":"x"})", 400, "seed", "integer"},
      {R"({"prompt":[1],"ignore_eos":1})", 400, "ignore_eos", "true or false"},
      {R"({"prompt":[1],"stream":"yes"})", 400, "stream", "true or false"},
      {R"({"prompt":[1],"stream_options":{"include_usage":true}})", 400, "stream_options",
       "only allowed"},
      {R"({"prompt":[1],"stream":true,"stream_options":[1]})", 400, "stream_options", "object"},
      {R"({"prompt":[1],"stop_token_ids":5})", 400, "stop_token_ids", "array"},
      {R"({"prompt":[1],"stop_token_ids":[5000]})", 400, "stop_token_ids", "vocabulary"},
      {R"({"prompt":[1],"stop":"\n"})", 400, "stop", "tokenizer"},
      {R"({"prompt":[1],"stop":5})", 400, "stop", "string"},
      {R"({"prompt":[1],"n":0})", 400, "n", "between 1 and 128"},
      {R"({"prompt":[1],"n":129})", 400, "n", "between 1 and 128"},
      {R"({"prompt":[1],"n":2,"best_of":3})", 400, "best_of", "not supported"},
      {R"({"prompt":[1],"best_of":2})", 400, "best_of", "not supported"},
      {R"({"prompt":[1],"echo":true,"logprobs":1})", 400, "echo", "prompt's logprobs"},
      {R"({"prompt":[1],"echo":"yes"})", 400, "echo", "true or false"},
      {R"({"prompt":[1],"logprobs":21})", 400, "logprobs", "between 0 and 20"},
      {R"({"prompt":[1],"logprobs":true})", 400, "logprobs", "integer"},
      {R"({"prompt":[1],"frequency_penalty":2.5})", 400, "frequency_penalty", "between -2 and 2"},
      {R"({"prompt":[1],"presence_penalty":-3})", 400, "presence_penalty", "between -2 and 2"},
      {R"({"prompt":[1],"presence_penalty":"x"})", 400, "presence_penalty", "number"},
      {R"({"prompt":[1],"repetition_penalty":0})", 400, "repetition_penalty", "greater than 0"},
      {R"({"prompt":[1],"min_p":1.5})", 400, "min_p", "between 0 and 1"},
      {R"({"prompt":[1],"logit_bias":[1]})", 400, "logit_bias", "object"},
      {R"({"prompt":[1],"logit_bias":{"x":1}})", 400, "logit_bias", "decimal"},
      {R"({"prompt":[1],"logit_bias":{"5x":1}})", 400, "logit_bias", "decimal"},
      {R"({"prompt":[1],"logit_bias":{"1000":1}})", 400, "logit_bias", "outside the vocabulary"},
      {R"({"prompt":[1],"logit_bias":{"5":101}})", 400, "logit_bias", "between -100 and 100"},
      {R"({"prompt":[1],"logit_bias":{"5":"1"}})", 400, "logit_bias", "logit_bias[\"5\"]"},
      {R"({"prompt":[1],"max_completion_tokens":64})", 400, "max_completion_tokens",
       "maximum context length"},
  };
  for (const Case& c : cases) {
    RequestError e = error(c.body);
    EXPECT_EQ(e.status, c.status) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_NE(e.message.find(c.says), std::string::npos) << c.body << " -> " << e.message;
  }
}

TEST(RequestParse, PromptFillingTheContextIsRefused) {
  std::string prompt = "[";
  for (int i = 0; i < 64; ++i) prompt += std::to_string(i) + (i < 63 ? "," : "]");
  RequestError e = error(R"({"prompt":)" + prompt + "}");
  EXPECT_EQ(e.param, "prompt");
  EXPECT_NE(e.message.find("maximum context length"), std::string::npos);
}

}  // namespace
}  // namespace gpufrac::engine
