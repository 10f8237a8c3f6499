#include "bench/stream_event.h"

#include <gtest/gtest.h>

namespace gpufrac {
namespace {

StreamEvent interpret(const std::string& data, const std::string& event = "") {
  return interpret_stream_message(SseMessage{event, data, 0});
}

TEST(StreamEvent, CompletionTextIsContent) {
  auto e = interpret(R"({"choices":[{"index":0,"text":" hi","finish_reason":null}]})");
  EXPECT_TRUE(e.content);
  EXPECT_FALSE(e.done);
  EXPECT_FALSE(e.error);
}

TEST(StreamEvent, EmptyTextIsNotContent) {
  EXPECT_FALSE(interpret(R"({"choices":[{"index":0,"text":""}]})").content);
}

TEST(StreamEvent, ChatRoleOnlyAndEmptyDeltasAreNotContent) {
  EXPECT_FALSE(interpret(R"({"choices":[{"delta":{"role":"assistant","content":""}}]})").content);
  EXPECT_FALSE(interpret(R"({"choices":[{"delta":{}}]})").content);
  EXPECT_FALSE(interpret(R"({"choices":[{"delta":{"content":null}}]})").content);
  EXPECT_FALSE(interpret(R"({"choices":[]})").content);
}

TEST(StreamEvent, ChatContentAndReasoningAreContent) {
  EXPECT_TRUE(interpret(R"({"choices":[{"delta":{"content":"x"}}]})").content);
  EXPECT_TRUE(interpret(R"({"choices":[{"delta":{"reasoning_content":"hmm"}}]})").content);
  EXPECT_TRUE(interpret(R"({"choices":[{"delta":{"reasoning":"hmm"}}]})").content);
}

TEST(StreamEvent, FinishReasonWithOrWithoutContent) {
  auto last = interpret(R"({"choices":[{"delta":{"content":"x"},"finish_reason":"length"}]})");
  EXPECT_TRUE(last.content);
  EXPECT_EQ(last.finish_reason, "length");
  auto own = interpret(R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})");
  EXPECT_FALSE(own.content);  // a chunk of its own moves no timestamp
  EXPECT_EQ(own.finish_reason, "stop");
  EXPECT_FALSE(interpret(R"({"choices":[{"text":"a","finish_reason":null}]})").finish_reason);
  EXPECT_FALSE(interpret(R"({"choices":[],"usage":{"completion_tokens":3}})").finish_reason);
}

TEST(StreamEvent, UsageOnlyChunk) {
  auto e = interpret(
      R"({"choices":[],"usage":{"prompt_tokens":2048,"completion_tokens":256,"total_tokens":2304}})");
  EXPECT_FALSE(e.content);
  EXPECT_EQ(e.prompt_tokens, 2048);
  EXPECT_EQ(e.completion_tokens, 256);
}

TEST(StreamEvent, ContentWithUsageInSameChunk) {
  auto e = interpret(R"({"choices":[{"text":"z"}],"usage":{"completion_tokens":3}})");
  EXPECT_TRUE(e.content);
  EXPECT_EQ(e.completion_tokens, 3);
  EXPECT_FALSE(e.prompt_tokens);
}

TEST(StreamEvent, NullUsageIsIgnored) {
  auto e = interpret(R"({"choices":[{"text":"a"}],"usage":null})");
  EXPECT_TRUE(e.content);
  EXPECT_FALSE(e.completion_tokens);
}

TEST(StreamEvent, Done) {
  EXPECT_TRUE(interpret("[DONE]").done);
}

TEST(StreamEvent, ErrorForms) {
  EXPECT_EQ(interpret(R"({"error":{"message":"boom","type":"x"}})").error, "boom");
  EXPECT_EQ(interpret(R"({"object":"error","message":"vllm says no","code":400})").error,
            "vllm says no");
  EXPECT_EQ(interpret(R"({"message":"over"})", "error").error, "over");
  EXPECT_EQ(interpret("plain text", "error").error, "plain text");
  EXPECT_TRUE(interpret(R"({"error":"short"})").error);
  EXPECT_FALSE(interpret(R"({"error":null,"choices":[{"text":"a"}]})").error);
}

TEST(StreamEvent, UnparseableDataIsAnError) {
  auto e = interpret("{not json");
  ASSERT_TRUE(e.error);
  EXPECT_NE(e.error->find("unparseable"), std::string::npos);
}

}  // namespace
}  // namespace gpufrac
