// StreamSplice: whole events only, however the bytes arrive; what a resumable stream delivered
// (ids, finish, [DONE]); the ends that interrupt it (an error event, [DONE] before a finish); a
// later engine stream's chunks carrying the first one's id and created; streams without ids.
#include "node/stream_splice.h"

#include <gtest/gtest.h>

namespace gpufrac {
namespace {

std::string token_chunk(const std::string& id, int created, int token, bool last = false) {
  return "data: " +
         Json{{"id", id},
              {"created", created},
              {"choices",
               {{{"index", 0},
                 {"text", " t"},
                 {"token_ids", {token}},
                 {"finish_reason", last ? Json("length") : Json()}}}}}
             .dump() +
         "\n\n";
}

TEST(StreamSplice, PassesWholeEventsOnlyHoweverTheBytesArrive) {
  StreamSplice splice(/*track_tokens=*/true);
  std::string stream =
      token_chunk("cmpl-1", 5, 7) + ": keep-alive\r\n\r\n" + token_chunk("cmpl-1", 5, 8);
  std::string out;
  for (char c : stream) splice.feed(std::string_view(&c, 1), out);
  EXPECT_EQ(out, stream);
  EXPECT_EQ(splice.delivered_ids(), (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(splice.events_delivered(), 2) << "a comment is not data";
  out.clear();
  splice.feed("data: {\"id\":\"cmpl-1\",\"choi", out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(splice.take_rest(), "data: {\"id\":\"cmpl-1\",\"choi");
}

TEST(StreamSplice, TracksIdsFinishAndDone) {
  StreamSplice splice(true);
  std::string out;
  splice.feed(token_chunk("cmpl-1", 5, 7) + token_chunk("cmpl-1", 5, 9, true), out);
  EXPECT_TRUE(splice.finished());
  EXPECT_FALSE(splice.done());
  splice.feed(
      "data: {\"id\":\"cmpl-1\",\"choices\":[],\"usage\":{\"completion_tokens\":2}}\n\ndata: "
      "[DONE]\n\n",
      out);
  EXPECT_TRUE(splice.done());
  EXPECT_FALSE(splice.interrupted());
  EXPECT_TRUE(splice.resumable());
  EXPECT_NE(out.find("[DONE]"), std::string::npos);
}

TEST(StreamSplice, AnErrorEventOrAnEarlyDoneInterruptsAndIsKeptBack) {
  for (std::string end : {std::string("data: {\"error\":{\"message\":\"generation failed\"}}\n\n"),
                          std::string("data: [DONE]\n\n")}) {
    StreamSplice splice(true);
    std::string out;
    splice.feed(token_chunk("cmpl-1", 5, 7) + end + "data: [DONE]\n\n", out);
    EXPECT_EQ(out, token_chunk("cmpl-1", 5, 7)) << end;
    EXPECT_TRUE(splice.interrupted());
    EXPECT_FALSE(splice.done());
    EXPECT_EQ(splice.held_error().empty(), end.find("error") == std::string::npos);
    splice.begin_attempt();
    EXPECT_FALSE(splice.interrupted());
    EXPECT_TRUE(splice.held_error().empty());
  }
}

TEST(StreamSplice, ALaterStreamContinuesTheFirstOnesIdAndCreated) {
  StreamSplice splice(true);
  std::string out;
  splice.feed(token_chunk("cmpl-1", 5, 7), out);
  splice.begin_attempt();
  out.clear();
  splice.feed(token_chunk("cmpl-9", 6, 8, true) +
                  "data: {\"id\":\"cmpl-9\",\"created\":6,\"choices\":[],\"usage\":{}}\n\n",
              out);
  size_t second = out.find("\n\n") + 2;
  Json chunk = Json::parse(out.substr(6, second - 8));
  EXPECT_EQ(chunk["id"], "cmpl-1");
  EXPECT_EQ(chunk["created"], 5);
  EXPECT_EQ(chunk["choices"][0]["token_ids"], Json({8}));
  Json usage = Json::parse(out.substr(second + 6, out.size() - second - 8));
  EXPECT_EQ(usage["id"], "cmpl-1");
  EXPECT_EQ(splice.delivered_ids(), (std::vector<int32_t>{7, 8}));
}

TEST(StreamSplice, AChunkWithoutIdsMakesTheStreamUnresumable) {
  StreamSplice splice(true);
  std::string out;
  splice.feed("data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n",
              out);
  EXPECT_FALSE(splice.resumable());
  StreamSplice untracked(false);
  untracked.feed(token_chunk("cmpl-1", 5, 7) + "data: [DONE]\n\n", out);
  EXPECT_FALSE(untracked.resumable());
  EXPECT_TRUE(untracked.delivered_ids().empty());
  EXPECT_EQ(untracked.events_delivered(), 2);
  EXPECT_TRUE(untracked.done());
}

}  // namespace
}  // namespace gpufrac
