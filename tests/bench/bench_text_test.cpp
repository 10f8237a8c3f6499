// Text-prompt workloads against the scripted server (in-process): chat and completions prompts
// built with its POST /tokenize come out exactly as long as asked (the server's
// usage.prompt_tokens, counted with its toy chat template, says so), fixed or drawn per request;
// chat streams are timed from the first content, not the role chunk; a server without /tokenize
// is one clear error before anything is measured.
#include <gtest/gtest.h>

#include <set>

#include "bench/load_driver.h"
#include "bench/metrics.h"
#include "common/error.h"
#include "fakes/scripted_sse_server.h"
#include "scripted_bench_setup.h"

namespace gpufrac {
namespace {

WorkloadSpec text_workload(Endpoint endpoint, int isl, double isl_stddev, int osl) {
  WorkloadSpec w;
  w.endpoint = endpoint;
  w.prompt = PromptKind::kText;
  w.isl = isl;
  w.isl_stddev = isl_stddev;
  w.osl = osl;
  return w;
}

PointRun drive(const ScriptedSseServer& server, const WorkloadSpec& workload, int concurrency,
               int requests, int warmup) {
  LoadPoint point;
  point.concurrency = concurrency;
  point.requests = requests;
  point.warmup = warmup;
  return run_load_point({target_at(server.port(), "scripted", workload.endpoint)}, workload, point, 3, 30);
}

ScriptedSseOptions fast_server() {
  ScriptedSseOptions options;
  options.ttft_ms = 2;
  options.itl_ms = 1;
  return options;
}

TEST(BenchText, ChatPromptsHaveExactlyTheIslWithTheTemplate) {
  ScriptedSseServer server(fast_server());
  server.start();
  PointRun run = drive(server, text_workload(Endpoint::kChat, 300, 0, 4), 4, 12, 2);
  ASSERT_EQ(run.records.size(), 14u);
  for (const RequestRecord& r : run.records) {
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.requested_input_tokens, 300);
    EXPECT_EQ(r.input_tokens, 300);  // the server's usage.prompt_tokens, template included
    EXPECT_EQ(r.output_tokens, 4);
    EXPECT_EQ(r.finish_reason, "length");
  }
  EXPECT_EQ(compute_target_metrics(run.records).input_token_mismatches, 0);
  EXPECT_GT(server.tokenize_requests(), 14);
}

TEST(BenchText, DrawnLengthsAreEachExact) {
  ScriptedSseServer server(fast_server());
  server.start();
  PointRun run = drive(server, text_workload(Endpoint::kChat, 120, 40, 2), 8, 40, 0);
  std::set<int64_t> lengths;
  for (const RequestRecord& r : run.records) {
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.input_tokens, r.requested_input_tokens) << "request " << r.request_id;
    lengths.insert(r.requested_input_tokens);
  }
  EXPECT_GT(lengths.size(), 15u);  // 40 draws from N(120, 40)
}

TEST(BenchText, CompletionsTextPromptsCountTheBos) {
  ScriptedSseServer server(fast_server());
  server.start();
  PointRun run = drive(server, text_workload(Endpoint::kCompletions, 64, 8, 3), 2, 8, 1);
  for (const RequestRecord& r : run.records) {
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.input_tokens, r.requested_input_tokens);
  }
}

TEST(BenchText, ChatTimingStartsAtTheFirstContentNotTheRoleChunk) {
  ScriptedSseOptions options;
  options.ttft_ms = 30;
  options.itl_ms = 4;
  options.finish_chunk = true;  // finish_reason alone, after the last token: not content
  ScriptedSseServer server(options);
  server.start();
  PointRun run = drive(server, text_workload(Endpoint::kChat, 40, 0, 8), 2, 6, 0);
  TargetMetrics m = compute_target_metrics(run.records);
  ASSERT_EQ(m.completed, 6);
  // The role chunk is sent the moment a request arrives; the first content 30 ms later.
  EXPECT_GE(m.ttft_ms.min, 30.0);
  EXPECT_LT(m.ttft_ms.p50(), 60.0);  // generous: a shared 2-core machine
  EXPECT_GT(m.itl_ms.p50(), 2.0);
  EXPECT_LT(m.itl_ms.p50(), 10.0);
  for (const RequestRecord& r : run.records) {
    EXPECT_EQ(r.event_ns.size(), 8u);  // the role and finish chunks are not content
    EXPECT_EQ(r.output_tokens, 8);
    EXPECT_EQ(r.finish_reason, "length");
  }
}

TEST(BenchText, NoTokenizeEndpointIsOneClearErrorBeforeAnyRequest) {
  ScriptedSseOptions options = fast_server();
  options.tokenize = false;
  ScriptedSseServer server(options);
  server.start();
  try {
    drive(server, text_workload(Endpoint::kChat, 100, 0, 4), 2, 4, 0);
    FAIL() << "a chat text workload needs /tokenize";
  } catch (const RuntimeFailure& e) {
    std::string message = e.what();
    EXPECT_NE(message.find(server.url() + "/tokenize answered HTTP 404"), std::string::npos)
        << message;
    EXPECT_NE(message.find("--endpoint completions --prompt ids"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  EXPECT_EQ(server.requests_received(), 0);
}

TEST(BenchText, UnknownModelAtTokenizeNamesIt) {
  ScriptedSseServer server(fast_server());
  server.start();
  BenchTarget target = target_at(server.port(), "scripted", Endpoint::kChat);
  target.model = "nope";
  LoadPoint point;
  point.requests = 2;
  point.warmup = 0;
  try {
    run_load_point({target}, text_workload(Endpoint::kChat, 50, 0, 2), point, 1, 10);
    FAIL() << "the model is unknown";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("The model `nope` does not exist."), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gpufrac
