#include "bench/workload.h"

#include <gtest/gtest.h>

#include <set>

#include "common/json.h"

namespace gpufrac {
namespace {

TEST(Workload, CompletionsPromptIsExactIdsBelowVocab) {
  WorkloadSpec spec;
  spec.isl = 300;
  spec.osl = 17;
  spec.vocab_size = 1000;
  WorkloadGenerator gen(spec, "m0", 1);
  PreparedRequest r = gen.make(0);
  Json body = Json::parse(r.body);
  ASSERT_TRUE(body["prompt"].is_array());
  EXPECT_EQ(body["prompt"].size(), 300u);
  for (const Json& id : body["prompt"]) {
    EXPECT_GE(id.get<int>(), 0);
    EXPECT_LT(id.get<int>(), 1000);
  }
  EXPECT_EQ(r.input_tokens, 300);
  EXPECT_EQ(r.output_tokens, 17);
  EXPECT_EQ(body["model"], "m0");
  EXPECT_EQ(body["max_tokens"], 17);
  EXPECT_EQ(body["min_tokens"], 17);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
}

TEST(Workload, PromptsAreDistinctPerRequestAndKey) {
  WorkloadSpec spec;
  spec.isl = 32;
  std::set<Json> heads;
  for (uint64_t key : {1, 2}) {
    WorkloadGenerator gen(spec, "m", key);
    for (int i = 0; i < 200; ++i) {
      Json prompt = Json::parse(gen.make(i).body)["prompt"];
      Json head(prompt.begin(), prompt.begin() + 16);
      EXPECT_TRUE(heads.insert(head).second) << "key " << key << " request " << i;
    }
  }
}

TEST(Workload, SmallVocabStillGivesDistinctHeads) {
  WorkloadSpec spec;
  spec.isl = 16;
  spec.vocab_size = 2;  // 65536 possible heads of 16 ids: collisions happen and are redrawn
  WorkloadGenerator gen(spec, "m", 3);
  std::set<std::string> heads;
  for (int i = 0; i < 2000; ++i) heads.insert(Json::parse(gen.make(i).body)["prompt"].dump());
  EXPECT_EQ(heads.size(), 2000u);
}

TEST(Workload, SameSeedSameRequests) {
  WorkloadSpec spec;
  spec.isl = 64;
  spec.isl_stddev = 10;
  WorkloadGenerator a(spec, "m", 9), b(spec, "m", 9);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(a.make(i).body, b.make(i).body);
  spec.seed = 1;
  WorkloadGenerator c(spec, "m", 9);
  EXPECT_NE(a.make(7).body, c.make(7).body);
}

TEST(Workload, LengthsVaryWithStddevAndStayPositive) {
  WorkloadSpec spec;
  spec.isl = 4;
  spec.osl = 3;
  spec.isl_stddev = 20;
  spec.osl_stddev = 20;
  WorkloadGenerator gen(spec, "m", 0);
  std::set<int> lengths;
  for (int i = 0; i < 500; ++i) {
    PreparedRequest r = gen.make(i);
    EXPECT_GE(r.input_tokens, 1);
    EXPECT_GE(r.output_tokens, 1);
    EXPECT_EQ(Json::parse(r.body)["prompt"].size(), size_t(r.input_tokens));
    EXPECT_EQ(Json::parse(r.body)["max_tokens"], r.output_tokens);
    lengths.insert(r.input_tokens);
  }
  EXPECT_GT(lengths.size(), 10u);
  spec.isl = 1000;
  spec.isl_stddev = 50;
  WorkloadGenerator wide(spec, "m", 0);
  double mean = 0;
  for (int i = 0; i < 400; ++i) mean += wide.make(i).input_tokens / 400.0;
  EXPECT_NEAR(mean, 1000, 10);  // 4 standard errors of the mean
}

TEST(Workload, TextPromptsGoAsMessagesOrPromptString) {
  WorkloadSpec spec;
  spec.endpoint = Endpoint::kChat;
  spec.prompt = PromptKind::kText;
  spec.isl = 50;
  spec.isl_stddev = 5;
  WorkloadGenerator chat(spec, "m \"quoted\"", 0);
  chat.set_texts({"first text", "second \"text\""});
  PreparedRequest r = chat.make(1);
  Json body = Json::parse(r.body);
  EXPECT_EQ(body["model"], "m \"quoted\"");
  ASSERT_EQ(body["messages"].size(), 1u);
  EXPECT_EQ(body["messages"][0]["role"], "user");
  EXPECT_EQ(body["messages"][0]["content"], "second \"text\"");
  EXPECT_FALSE(body.contains("prompt"));
  EXPECT_EQ(r.input_tokens, chat.input_length(1));  // the length the text was built to
  EXPECT_EQ(body["min_tokens"], spec.osl);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(std::string(endpoint_path(Endpoint::kChat)), "/v1/chat/completions");
  EXPECT_THROW(chat.make(2), std::logic_error);  // never built

  spec.endpoint = Endpoint::kCompletions;
  WorkloadGenerator completions(spec, "m", 0);
  completions.set_texts({"plain text"});
  EXPECT_EQ(Json::parse(completions.make(0).body)["prompt"], "plain text");
}

TEST(Workload, TextSeedsAndLengthsArePerRequest) {
  WorkloadSpec spec;
  spec.prompt = PromptKind::kText;
  spec.isl = 100;
  spec.isl_stddev = 30;
  WorkloadGenerator a(spec, "m", 1), b(spec, "m", 1), other_key(spec, "m", 2);
  std::set<uint64_t> seeds;
  std::set<int> lengths;
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(a.text_seed(i), b.text_seed(i));
    EXPECT_EQ(a.input_length(i), b.input_length(i));
    seeds.insert(a.text_seed(i));
    seeds.insert(other_key.text_seed(i));
    lengths.insert(a.input_length(i));
  }
  EXPECT_EQ(seeds.size(), 200u);
  EXPECT_GT(lengths.size(), 20u);
}

}  // namespace
}  // namespace gpufrac
