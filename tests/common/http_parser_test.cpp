#include "common/http_parser.h"

#include <gtest/gtest.h>

namespace gpufrac {
namespace {

// Feeds `wire` split at every possible point (and byte by byte) and checks the same result.
void expect_same_at_every_split(HttpParser::Kind kind, const std::string& wire,
                                const std::string& body) {
  for (size_t split = 0; split <= wire.size(); ++split) {
    HttpParser parser(kind);
    std::string out;
    size_t used = parser.feed(std::string_view(wire).substr(0, split), out);
    used += parser.feed(std::string_view(wire).substr(used), out);
    ASSERT_EQ(parser.state(), HttpParser::State::kDone) << "split " << split;
    EXPECT_EQ(out, body) << "split " << split;
    EXPECT_EQ(used, wire.size());
  }
  HttpParser parser(kind);
  std::string out;
  for (char c : wire) parser.feed(std::string_view(&c, 1), out);
  EXPECT_EQ(parser.state(), HttpParser::State::kDone);
  EXPECT_EQ(out, body);
}

TEST(HttpParser, RequestWithContentLength) {
  std::string wire =
      "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
      "Content-Length: 11\r\n\r\n{\"a\":\"b c\"}";
  expect_same_at_every_split(HttpParser::Kind::kRequest, wire, "{\"a\":\"b c\"}");
  HttpParser parser(HttpParser::Kind::kRequest);
  std::string body;
  parser.feed(wire, body);
  EXPECT_EQ(parser.head().method, "POST");
  EXPECT_EQ(parser.head().path, "/v1/completions");
  EXPECT_EQ(parser.head().target, "/v1/completions?x=1");
  EXPECT_EQ(parser.head().header("content-type"), "application/json");
  EXPECT_TRUE(parser.head().keep_alive());
}

TEST(HttpParser, ChunkedResponseWithExtensionsAndTrailer) {
  std::string wire =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;ext=1\r\nhello\r\n1c\r\ndata: {\"x\": 1}\n\ndata: [DONE]\r\n0\r\nX-Trailer: y\r\n\r\n";
  expect_same_at_every_split(HttpParser::Kind::kResponse, wire,
                             "hellodata: {\"x\": 1}\n\ndata: [DONE]");
}

TEST(HttpParser, ResponseUntilCloseNeedsEof) {
  HttpParser parser(HttpParser::Kind::kResponse);
  std::string body;
  parser.feed("HTTP/1.0 200 OK\r\n\r\nabc", body);
  EXPECT_EQ(parser.state(), HttpParser::State::kBody);
  EXPECT_TRUE(parser.finish_on_eof());
  EXPECT_EQ(body, "abc");
}

TEST(HttpParser, TruncatedLengthBodyIsNotComplete) {
  HttpParser parser(HttpParser::Kind::kResponse);
  std::string body;
  parser.feed("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", body);
  EXPECT_FALSE(parser.finish_on_eof());
}

TEST(HttpParser, PipelinedRequestsLeaveTheRest) {
  std::string one = "GET /health HTTP/1.1\r\n\r\n";
  std::string wire = one + "GET /v1/models HTTP/1.1\r\n\r\n";
  HttpParser parser(HttpParser::Kind::kRequest);
  std::string body;
  size_t used = parser.feed(wire, body);
  EXPECT_EQ(used, one.size());
  EXPECT_EQ(parser.head().path, "/health");
  parser.reset();
  parser.feed(std::string_view(wire).substr(used), body);
  EXPECT_EQ(parser.head().path, "/v1/models");
}

TEST(HttpParser, Errors) {
  struct Case {
    std::string wire;
    HttpParser::Error error;
  };
  std::vector<Case> cases = {
      {"GARBAGE\r\n\r\n", HttpParser::Error::kMalformed},
      {"GET nopath HTTP/1.1\r\n\r\n", HttpParser::Error::kMalformed},
      {"GET / HTTP/2.0\r\n\r\n", HttpParser::Error::kMalformed},
      {"GET / HTTP/1.1\r\nbad header\r\n\r\n", HttpParser::Error::kMalformed},
      {"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n", HttpParser::Error::kMalformed},
      {"POST / HTTP/1.1\r\nContent-Length: 999999\r\n\r\n", HttpParser::Error::kBodyTooLarge},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", HttpParser::Error::kUnsupported},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", HttpParser::Error::kMalformed},
      {"GET / HTTP/1.1\r\nX: " + std::string(2000, 'a'), HttpParser::Error::kHeadTooLarge},
  };
  for (const Case& c : cases) {
    HttpParser parser(HttpParser::Kind::kRequest, 1024, 1000);
    std::string body;
    parser.feed(c.wire, body);
    EXPECT_EQ(parser.state(), HttpParser::State::kError) << c.wire;
    EXPECT_EQ(parser.error(), c.error) << c.wire;
  }
}

TEST(HttpParser, NoBodyStatuses) {
  HttpParser parser(HttpParser::Kind::kResponse);
  std::string body;
  parser.feed("HTTP/1.1 204 No Content\r\n\r\n", body);
  EXPECT_EQ(parser.state(), HttpParser::State::kDone);
}

}  // namespace
}  // namespace gpufrac
