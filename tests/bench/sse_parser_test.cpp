#include "bench/sse_parser.h"

#include <gtest/gtest.h>

namespace gpufrac {
namespace {

std::vector<SseMessage> parse_whole(std::string_view text, int64_t ns = 1) {
  SseParser parser;
  std::vector<SseMessage> out;
  parser.feed(text, ns, out);
  return out;
}

TEST(SseParser, SeveralMessagesInOneRead) {
  auto m = parse_whole("data: a\n\ndata: b\n\ndata: [DONE]\n\n", 42);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].data, "a");
  EXPECT_EQ(m[1].data, "b");
  EXPECT_EQ(m[2].data, "[DONE]");
  for (const auto& message : m) EXPECT_EQ(message.first_byte_ns, 42);
}

TEST(SseParser, MessageSplitAcrossReadsKeepsItsFirstBytesTime) {
  SseParser parser;
  std::vector<SseMessage> out;
  parser.feed("da", 100, out);
  parser.feed("ta: {\"x\":", 200, out);
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(parser.mid_message());
  parser.feed("1}\n", 300, out);
  EXPECT_TRUE(out.empty());  // not complete before the blank line
  parser.feed("\ndata: next", 400, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, "{\"x\":1}");
  EXPECT_EQ(out[0].first_byte_ns, 100);
  parser.feed("\n\n", 500, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].first_byte_ns, 400);  // began in the read at 400, ended at 500
  EXPECT_FALSE(parser.mid_message());
}

TEST(SseParser, ByteByByteEqualsWhole) {
  std::string text = "event: x\r\ndata: one\r\ndata: two\r\n\r\n: comment\n\ndata:three\r\r";
  SseParser parser;
  std::vector<SseMessage> out;
  for (size_t i = 0; i < text.size(); ++i) parser.feed(text.substr(i, 1), int64_t(i), out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].event, "x");
  EXPECT_EQ(out[0].data, "one\ntwo");
  EXPECT_EQ(out[0].first_byte_ns, 0);
  EXPECT_EQ(out[1].data, "three");
  EXPECT_EQ(out[1].first_byte_ns, int64_t(text.find("data:three")));
}

TEST(SseParser, CommentsAreDroppedAndDoNotStartMessages) {
  SseParser parser;
  std::vector<SseMessage> out;
  parser.feed(": keep-alive\n\n", 1, out);
  parser.feed(": ping\n", 2, out);
  parser.feed("data: x\n\n", 3, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, "x");
  EXPECT_EQ(out[0].first_byte_ns, 3);  // the comment before it does not start the message
}

TEST(SseParser, CrAtEndOfOneReadAndLfAtStartOfNextIsOneLineEnd) {
  SseParser parser;
  std::vector<SseMessage> out;
  parser.feed("data: a\r", 1, out);
  parser.feed("\ndata: b\r\n\r\n", 2, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, "a\nb");  // the LF did not make a blank line
}

TEST(SseParser, FieldWithoutSpaceOrValue) {
  auto m = parse_whole("data:x\ndata\ndata:  two spaces\n\n");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].data, "x\n\n two spaces");  // only one leading space is stripped
}

TEST(SseParser, MessagesWithoutDataAreNotDispatched) {
  auto m = parse_whole("event: ping\n\nid: 3\nretry: 10\n\n\n\ndata: y\n\n");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].data, "y");
  EXPECT_EQ(m[0].event, "");
}

TEST(SseParser, IncompleteTailStaysPending) {
  SseParser parser;
  std::vector<SseMessage> out;
  parser.feed("data: done\n\ndata: cut", 1, out);
  EXPECT_EQ(out.size(), 1u);
  EXPECT_TRUE(parser.mid_message());
}

}  // namespace
}  // namespace gpufrac
