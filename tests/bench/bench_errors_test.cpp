// Every request ends with a recorded status: HTTP errors, error events, dropped connections,
// stalls (timeouts), short outputs, missing [DONE], refused connections. None is lost.
#include <gtest/gtest.h>

#include <map>

#include "bench/load_driver.h"
#include "bench/metrics.h"
#include "common/clock.h"
#include "common/raw_http_exchange.h"
#include "scripted_bench_setup.h"

namespace gpufrac {
namespace {

PointRun drive(const std::vector<BenchTarget>& targets, int concurrency, int requests,
               double timeout_s = 10, int osl = 8) {
  return run_load_point(targets, workload_of(16, osl), closed_loop_point(concurrency, requests), 7,
                        timeout_s);
}

std::map<std::string, int> count_statuses(const std::vector<RequestRecord>& records) {
  std::map<std::string, int> counts;
  for (const RequestRecord& r : records) ++counts[status_name(r.status)];
  return counts;
}

TEST(BenchErrors, EveryFailureKindIsCountedNoneLost) {
  ScriptedSseOptions options = scripted_timing(5, 2);
  for (const char* rule :
       {"http_error,every=10,offset=0,status=503", "error_event,every=10,offset=1,after=3",
        "drop,every=10,offset=2,after=2", "short,every=10,offset=3,after=5",
        "no_done,every=10,offset=4", "stall,every=10,offset=5,after=1"}) {
    options.failures.push_back(parse_failure_rule(rule));
  }
  RunningScriptedServer server(options);
  int64_t start = monotonic_ns();
  PointRun run = drive({target_at(server.port())}, 10, 20, /*timeout_s=*/1.0);
  double elapsed_s = double(monotonic_ns() - start) / 1e9;
  ASSERT_EQ(run.records.size(), 20u);
  std::map<std::string, int> counts = count_statuses(run.records);
  EXPECT_EQ(counts["http_error"], 2);
  EXPECT_EQ(counts["stream_error"], 4);  // error events and streams without [DONE]
  EXPECT_EQ(counts["connection_error"], 2);
  EXPECT_EQ(counts["timeout"], 2);
  EXPECT_EQ(counts["ok"], 10);  // 8 plain + the 2 short ones
  EXPECT_LT(elapsed_s, 5.0);    // stalls end at the 1 s timeout, not later

  TargetMetrics m = compute_target_metrics(run.records);
  EXPECT_EQ(m.completed, 10);
  EXPECT_EQ(m.failed, 10);
  EXPECT_EQ(m.output_token_mismatches, 2);  // the two short outputs
  EXPECT_EQ(m.errors["timeout"], 2);

  for (const RequestRecord& r : run.records) {
    EXPECT_GT(r.end_ns, 0);
    if (r.status == RequestStatus::kHttpError) {
      EXPECT_EQ(r.http_status, 503);
      EXPECT_EQ(r.error, "HTTP 503: scripted failure");
    } else if (r.status == RequestStatus::kConnectionError) {
      EXPECT_NE(r.error.find("mid-response after 2 content events"), std::string::npos) << r.error;
      EXPECT_EQ(r.event_ns.size(), 2u);
    } else if (r.status == RequestStatus::kTimeout) {
      EXPECT_NE(r.error.find("after 1 content events"), std::string::npos) << r.error;
    } else if (r.status == RequestStatus::kStreamError) {
      bool error_event = r.error.find("error event: scripted failure mid-stream") == 0;
      bool no_done = r.error.find("without [DONE]") != std::string::npos;
      EXPECT_TRUE(error_event || no_done) << r.error;
    } else if (r.output_tokens != r.requested_output_tokens) {
      EXPECT_EQ(r.output_tokens, 5);
      EXPECT_TRUE(r.output_tokens_from_usage);
    }
  }
}

TEST(BenchErrors, RefusedConnectionsAreRecorded) {
  PointRun run = drive({target_at(testing::free_port())}, 4, 8);
  ASSERT_EQ(run.records.size(), 8u);
  for (const RequestRecord& r : run.records) {
    EXPECT_EQ(r.status, RequestStatus::kConnectionError);
    EXPECT_EQ(r.sent_ns, 0);
    EXPECT_NE(r.error.find("cannot connect to 127.0.0.1"), std::string::npos) << r.error;
  }
}

TEST(BenchErrors, UnknownModelIsAnHttpErrorWithTheServersMessage) {
  RunningScriptedServer server(ScriptedSseOptions{});
  PointRun run = drive({target_at(server.port(), "nope")}, 2, 3);
  ASSERT_EQ(run.records.size(), 3u);
  for (const RequestRecord& r : run.records) {
    EXPECT_EQ(r.status, RequestStatus::kHttpError);
    EXPECT_EQ(r.http_status, 404);
    EXPECT_EQ(r.error, "HTTP 404: The model `nope` does not exist.");
  }
}

TEST(BenchErrors, WithoutUsageTokensAreCountedFromEvents) {
  ScriptedSseOptions options = scripted_timing(2, 1);
  options.usage = false;
  options.tokens_per_chunk = 2;
  RunningScriptedServer server(options);
  PointRun run = drive({target_at(server.port())}, 2, 4, 10, 8);
  for (const RequestRecord& r : run.records) {
    EXPECT_TRUE(r.ok()) << r.error;
    EXPECT_FALSE(r.output_tokens_from_usage);
    EXPECT_EQ(r.output_tokens, 4);  // 4 chunks of 2 tokens: the fallback can only count chunks
  }
  // ... and the shortfall against the asked 8 is flagged, never silently accepted.
  EXPECT_EQ(compute_target_metrics(run.records).output_token_mismatches, 4);
}

TEST(BenchErrors, TwoTargetsOneDownOneUp) {
  RunningScriptedServer server(scripted_timing(2, 1));
  ScriptedSseOptions failing_options;
  failing_options.failures = {parse_failure_rule("http_error,status=500")};
  RunningScriptedServer failing(failing_options);
  PointRun run = drive({target_at(server.port()), target_at(failing.port())}, 3, 6);
  ASSERT_EQ(run.records.size(), 12u);
  for (const RequestRecord& r : run.records) {
    EXPECT_EQ(r.ok(), r.target == 0) << r.error;
  }
}

TEST(BenchErrors, OpenLoopCapMakesArrivalsWait) {
  RunningScriptedServer server(scripted_timing(50, 5));
  // A request every 5 ms on average, each taking ~65 ms; at most 2 in flight.
  LoadPoint point = open_loop_point(/*request_rate=*/200, /*concurrency_cap=*/2, 12);
  PointRun run = run_load_point({target_at(server.port())}, workload_of(8, 4), point, 3, 10);
  ASSERT_EQ(run.records.size(), 12u);
  int64_t waited = 0;
  for (const RequestRecord& r : run.records) {
    EXPECT_TRUE(r.ok()) << r.error;
    if (r.sent_ns - r.scheduled_ns > 20'000'000) ++waited;
  }
  EXPECT_GE(waited, 6);  // with 2 slots most arrivals queue for a slot
  TargetMetrics m = compute_target_metrics(run.records);
  EXPECT_LE(m.effective_concurrency, 2.05);
}

TEST(BenchErrors, OpenLoopArrivalsFollowTheRate) {
  RunningScriptedServer server(scripted_timing(1, 1));
  LoadPoint point = open_loop_point(/*request_rate=*/100, /*concurrency_cap=*/0, 200);
  PointRun run = run_load_point({target_at(server.port())}, workload_of(8, 2), point, 5, 10);
  ASSERT_EQ(run.records.size(), 200u);
  int64_t first = INT64_MAX, last = 0;
  for (const RequestRecord& r : run.records) {
    first = std::min(first, r.scheduled_ns);
    last = std::max(last, r.scheduled_ns);
  }
  // 199 exponential gaps of mean 10 ms: 1.99 s, standard deviation 0.14 s.
  EXPECT_NEAR(double(last - first) / 1e9, 1.99, 0.6);
}

}  // namespace
}  // namespace gpufrac
