// bench against the scripted SSE server: measured TTFT and ITL p50 match what the server's trace
// says it did (within 1 ms at concurrency 1..256, plus this machine's wake-up latency), the
// scripted values within 2% at 1,024 streams, and several tokens per chunk do not inflate ITL.
// The server is the scripted_sse_server executable, a process of its own.
// Runs serially (RUN_SERIAL): other tests on the same 2 cores would be measured too. Where allowed
// (root, or CAP_SYS_NICE) the process runs SCHED_FIFO, so that unrelated jobs on a shared machine
// delay neither the server's script nor the client; the threads only block in epoll and condition
// variables, so they never hold a core for long.
// A first chunk reaches a client that has slept through the TTFT one wake-up later than the
// server handed it over (a virtual machine's idle vCPU may take a millisecond or more to wake);
// later chunks pay the same wake-up, so ITL is free of it. The test measures that latency on the
// machine first (wake_latency_ms) and allows it on top of 1 ms wherever one arrival is timed.
// A timed check that misses is measured again, up to three times: a neighbour on a shared machine
// can stall any one run, while a bench that is off misses every time.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bench/load_driver.h"
#include "bench/metrics.h"
#include "bench/stats.h"
#include "bench/stream_client.h"
#include "common/clock.h"
#include "common/json.h"
#include "fakes/scripted_sse_server_process.h"
#include "scripted_bench_setup.h"

namespace gpufrac {
namespace {

class RealtimeIfAllowed : public ::testing::Environment {
 public:
  void SetUp() override {
    sched_param param{};
    param.sched_priority = 10;
    bool realtime = ::sched_setscheduler(0, SCHED_FIFO, &param) == 0;
    std::printf("bench_accuracy_test: %s\n",
                realtime ? "SCHED_FIFO" : "normal priority (SCHED_FIFO not permitted)");
  }
};
[[maybe_unused]] const auto* const kRealtime =
    ::testing::AddGlobalTestEnvironment(new RealtimeIfAllowed);

ScriptedSseServerProcess start_server(std::vector<std::string> arguments) {
  return ScriptedSseServerProcess(SCRIPTED_SSE_SERVER_BIN, std::move(arguments));
}

struct Measured {
  TargetMetrics metrics;
  std::vector<RequestRecord> records;
};

Measured drive(const ScriptedSseServerProcess& server, int concurrency, int requests, int warmup,
               int osl, Endpoint endpoint = Endpoint::kCompletions) {
  WorkloadSpec workload;
  workload.endpoint = endpoint;
  workload.isl = 64;
  workload.osl = osl;
  LoadPoint point;
  point.concurrency = concurrency;
  point.requests = requests;
  point.warmup = warmup;
  PointRun run = run_load_point({target_at(server.port(), "scripted", endpoint)}, workload, point, 1, 60);
  TargetMetrics metrics = compute_target_metrics(run.records);
  std::printf("c=%d: TTFT p50 %.3f ms, ITL p50 %.3f ms, gap p50 %.3f ms, %lld ok, %lld failed\n",
              concurrency, metrics.ttft_ms.p50(), metrics.itl_ms.p50(),
              metrics.inter_chunk_gap_ms.p50(), (long long)metrics.completed,
              (long long)metrics.failed);
  return {std::move(metrics), std::move(run.records)};
}

// What the server did with one request, from its --trace: when it read the request and when it
// handed each chunk to its HTTP thread (CLOCK_MONOTONIC, the clock of bench's timestamps).
struct ServerSide {
  int64_t arrived_ns = 0;
  std::vector<int64_t> handed_ns;
};

// X-Request-Id ("<target>-<request_id>") -> what the server did.
std::map<std::string, ServerSide> read_trace(const std::string& path) {
  std::map<std::string, ServerSide> sides;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    Json stream = Json::parse(line);
    ServerSide& side = sides[stream.at("request_id").get<std::string>()];
    side.arrived_ns = stream.at("arrived_ns").get<int64_t>();
    for (const Json& chunk : stream.at("chunks")) side.handed_ns.push_back(chunk.at(1).get<int64_t>());
  }
  return sides;
}

double ms_between(int64_t from_ns, int64_t to_ns) { return double(to_ns - from_ns) / 1e6; }

// Median over 9 tries of the time from a timer deadline to the moment a thread blocked in read()
// holds the byte another thread wrote at that deadline, 30 ms after the last one (as a client
// waits through a TTFT), in ms: the writer's wake-up from its timer and the reader's from its
// read, as the server's script and bench's client wake.
double wake_latency_ms() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 0;
  constexpr int kTries = 9;
  std::thread writer([&] {
    for (int i = 0; i < kTries; ++i) {
      const int64_t deadline = monotonic_ns() + 30000000;
      const timespec at{time_t(deadline / 1000000000), long(deadline % 1000000000)};
      ::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr);
      if (::write(fds[1], &deadline, sizeof deadline) != sizeof deadline) return;
    }
  });
  std::vector<double> latencies;
  for (int64_t deadline = 0; int(latencies.size()) < kTries;) {
    if (::read(fds[0], &deadline, sizeof deadline) != sizeof deadline) break;
    latencies.push_back(ms_between(deadline, monotonic_ns()));
  }
  writer.join();
  ::close(fds[0]);
  ::close(fds[1]);
  const double latency = compute_stats(latencies).p50();
  std::printf("this machine's wake-up latency p50 %.3f ms\n", latency);
  return latency;
}

// The timed checks of one measurement: each miss is kept as a line, so that a run that misses
// can be measured again and the last run's misses reported.
struct TimedChecks {
  std::vector<std::string> misses;
  void near(double measured, double expected, double tolerance, const std::string& what) {
    if (std::fabs(measured - expected) <= tolerance) return;
    char line[256];
    std::snprintf(line, sizeof line, "%s: %.3f, expected %.3f +- %.3f", what.c_str(), measured,
                  expected, tolerance);
    misses.push_back(line);
  }
};

// Runs `measure` (which returns its timed checks) up to three times, until one run meets them
// all; fails with the last run's misses.
template <typename Measure>
void measure_until_timed_checks_hold(Measure measure) {
  constexpr int kRuns = 3;
  for (int run = 1; run <= kRuns; ++run) {
    const TimedChecks checks = measure();
    if (checks.misses.empty() || ::testing::Test::HasFailure()) return;
    for (const std::string& miss : checks.misses) {
      std::printf("run %d of %d missed: %s\n", run, kRuns, miss.c_str());
      if (run == kRuns) ADD_FAILURE() << miss;
    }
    // What stalled the run (a neighbour, the kernel closing the last test's sockets) may last a
    // moment: the next run starts a second later.
    if (run < kRuns) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

class Accuracy : public ::testing::TestWithParam<int> {};

// Bench's TTFT and ITL are compared with what the server's own trace says it did to the same
// requests, so the test measures bench alone: time a request waits in the server before it is
// read (its one HTTP thread takes a burst of c requests one after another) is real server-side
// queueing, which bench rightly counts in TTFT, and which the trace counts too. The script
// itself (first chunk 40 ms after the request was read, then one every 10 ms) is checked
// against the same trace.
TEST_P(Accuracy, TtftAndItlP50WithinOneMillisecondOfTheServersTrace) {
  raise_open_file_limit();
  const int c = GetParam();
  const double arrival_tolerance_ms = 1.0 + wake_latency_ms();
  const std::string trace = (std::filesystem::temp_directory_path() /
                             ("bench-accuracy-" + std::to_string(::getpid()) + ".jsonl"))
                                .string();
  measure_until_timed_checks_hold([&] {
    ScriptedSseServerProcess server =
        start_server({"--ttft-ms", "40", "--itl-ms", "10", "--trace", trace});
    // The first wave reaches the server as one burst of c requests (and c TCP handshakes): it is
    // warmup, as a real run's would be; each later request is sent when one before it completes.
    Measured m = drive(server, c, std::max(8, 2 * c), c, 16);
    server.stop();
    const std::map<std::string, ServerSide> sides = read_trace(trace);
    std::filesystem::remove(trace);
    EXPECT_EQ(m.metrics.failed, 0);
    EXPECT_EQ(m.metrics.completed, std::max(8, 2 * c));
    EXPECT_EQ(m.metrics.output_token_mismatches, 0);
    EXPECT_NEAR(m.metrics.effective_concurrency, c, 0.1 * c + 0.1);

    std::vector<double> queued_ms, server_ttft_ms, scripted_ttft_ms, server_itl_ms, server_gap_ms;
    for (const RequestRecord& r : m.records) {
      if (r.warmup || !r.ok()) continue;
      const auto found = sides.find(std::to_string(r.target) + "-" + std::to_string(r.request_id));
      EXPECT_NE(found, sides.end()) << "request " << r.request_id << " is not in the trace";
      if (found == sides.end()) continue;
      const ServerSide& side = found->second;
      EXPECT_EQ(side.handed_ns.size(), r.event_ns.size());
      if (side.handed_ns.size() != r.event_ns.size()) continue;
      // One clock: a chunk is received after it was handed over. (A request may be read a few us
      // before bench stamps it sent, which it does when its write returns.)
      EXPECT_LE(side.handed_ns.front(), r.first_ns);
      queued_ms.push_back(ms_between(r.sent_ns, side.arrived_ns));
      server_ttft_ms.push_back(ms_between(r.sent_ns, side.handed_ns.front()));
      scripted_ttft_ms.push_back(ms_between(side.arrived_ns, side.handed_ns.front()));
      server_itl_ms.push_back(ms_between(side.handed_ns.front(), side.handed_ns.back()) /
                              double(side.handed_ns.size() - 1));
      for (size_t k = 1; k < side.handed_ns.size(); ++k) {
        server_gap_ms.push_back(ms_between(side.handed_ns[k - 1], side.handed_ns[k]));
      }
    }
    const Stats queued = compute_stats(queued_ms), server_ttft = compute_stats(server_ttft_ms),
                scripted_ttft = compute_stats(scripted_ttft_ms),
                server_itl = compute_stats(server_itl_ms), server_gap = compute_stats(server_gap_ms);
    std::printf("c=%d server trace: queued before read p50 %.3f ms (max %.3f), TTFT p50 %.3f ms "
                "(scripted part %.3f), ITL p50 %.3f ms\n",
                c, queued.p50(), queued.max, server_ttft.p50(), scripted_ttft.p50(),
                server_itl.p50());
    TimedChecks checks;
    const std::string at = " at c=" + std::to_string(c);
    checks.near(m.metrics.ttft_ms.p50(), server_ttft.p50(), arrival_tolerance_ms,
                "bench TTFT p50 against the trace's" + at);
    checks.near(m.metrics.itl_ms.p50(), server_itl.p50(), 1.0, "bench ITL p50 against the trace's" + at);
    checks.near(m.metrics.inter_chunk_gap_ms.p50(), server_gap.p50(), 1.0,
                "bench chunk gap p50 against the trace's" + at);
    // The server wakes for its script like any client: its first chunk is one wake-up late.
    checks.near(scripted_ttft.p50(), 40, arrival_tolerance_ms, "the server's scripted TTFT p50" + at);
    checks.near(server_itl.p50(), 10, 1.0, "the server's scripted ITL p50" + at);
    return checks;
  });
}

INSTANTIATE_TEST_SUITE_P(Concurrency, Accuracy, ::testing::Values(1, 16, 64, 256));

TEST(Accuracy1024, ThousandStreamsWithinTwoPercent) {
  ASSERT_GE(raise_open_file_limit(), 1100u) << "needs RLIMIT_NOFILE >= 1100";
  ScriptedSseServerProcess server = start_server({"--ttft-ms", "100", "--itl-ms", "25"});
  // A first wave of 1,024 warmup requests opens the connections (as any run's warmup does), so
  // the measured waves time streams, not 1,024 TCP handshakes. The measured requests are sent as
  // the warm-up ones complete, spread over the 10-20 ms the scripted server (one HTTP thread)
  // took to read the burst on 2 cores, so they reach it about as fast as it reads them: some
  // server-side queueing remains (bench rightly counts it in TTFT), hence 2% and three waves.
  const double wake_ms = wake_latency_ms();
  measure_until_timed_checks_hold([&] {
    Measured m = drive(server, 1024, 3 * 1024, 1024, 16);
    EXPECT_EQ(m.metrics.failed, 0);
    EXPECT_EQ(m.metrics.completed, 3 * 1024);
    EXPECT_GT(m.metrics.effective_concurrency, 900);
    TimedChecks checks;
    checks.near(m.metrics.ttft_ms.p50(), 100, 2.0 + wake_ms, "TTFT p50 of 1,024 streams");  // 2%
    checks.near(m.metrics.itl_ms.p50(), 25, 0.5, "ITL p50 of 1,024 streams");                // 2%
    return checks;
  });
}

TEST(Accuracy, SeveralTokensPerChunkDoNotInflateItl) {
  ScriptedSseServerProcess server =
      start_server({"--ttft-ms", "20", "--itl-ms", "5", "--tokens-per-chunk", "4"});
  // 16 tokens in 4 chunks 20 ms apart: ITL = 3 x 20 / 15 = 4 ms by definition (AIPerf's too);
  // counting chunks as tokens would give 20 ms.
  Measured m = drive(server, 4, 8, 0, 16);
  EXPECT_EQ(m.metrics.completed, 8);
  EXPECT_NEAR(m.metrics.itl_ms.p50(), 4, 0.5);
  EXPECT_NEAR(m.metrics.inter_chunk_gap_ms.p50(), 20, 1.0);
  EXPECT_DOUBLE_EQ(m.metrics.output_tokens.p50(), 16);
  for (const RequestRecord& r : m.records) EXPECT_EQ(r.event_ns.size(), 4u);
}

TEST(Accuracy, ChatRoleChunkAndCommentsAreNotTokens) {
  ScriptedSseServerProcess server =
      start_server({"--ttft-ms", "30", "--itl-ms", "5", "--comments"});
  // The scripted 30 ms end with the server's timer wake-up and the client's: the two that
  // wake_latency_ms measures together.
  const double tolerance_ms = 1.0 + wake_latency_ms();
  measure_until_timed_checks_hold([&] {
    Measured m = drive(server, 2, 4, 0, 8, Endpoint::kChat);
    EXPECT_EQ(m.metrics.completed, 4);
    for (const RequestRecord& r : m.records) {
      EXPECT_EQ(r.event_ns.size(), 8u);
      EXPECT_EQ(r.output_tokens, 8);
      EXPECT_GT(r.input_tokens, 0);  // from usage.prompt_tokens
    }
    TimedChecks checks;  // the role chunk, sent at once, does not count
    checks.near(m.metrics.ttft_ms.p50(), 30, tolerance_ms, "TTFT p50 of a chat stream");
    return checks;
  });
}

TEST(Accuracy, ScheduledAndSentTimesAreRecorded) {
  ScriptedSseServerProcess server = start_server({"--ttft-ms", "5", "--itl-ms", "1"});
  Measured m = drive(server, 2, 6, 2, 4);
  ASSERT_EQ(m.records.size(), 8u);
  for (const RequestRecord& r : m.records) {
    EXPECT_GT(r.scheduled_ns, 0);
    EXPECT_GE(r.sent_ns, r.scheduled_ns);
    EXPECT_GT(r.first_ns, r.sent_ns);
    EXPECT_GE(r.end_ns, r.last_ns);
  }
  EXPECT_TRUE(m.records[0].warmup);
  EXPECT_FALSE(m.records[2].warmup);
}

}  // namespace
}  // namespace gpufrac
