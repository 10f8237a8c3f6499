// What the bench tests that run against a ScriptedSseServer build again and again: a server
// already listening in-process (RunningScriptedServer), a script with its timing
// (scripted_timing), a BenchTarget for a port (target_at; also for the server run as a process),
// and the WorkloadSpec and LoadPoint of a run without warm-up requests (workload_of,
// closed_loop_point, open_loop_point). Every other field keeps its
// default, so a test states only what it depends on. Header-only; plain values, no shared state.
#pragma once

#include <string>
#include <utility>

#include "bench/load_driver.h"
#include "bench/workload.h"
#include "fakes/scripted_sse_server.h"

namespace gpufrac {

// A ScriptedSseServer that listens once constructed (port(), url()); it stops when destroyed.
class RunningScriptedServer : public ScriptedSseServer {
 public:
  explicit RunningScriptedServer(ScriptedSseOptions options)
      : ScriptedSseServer(std::move(options)) {
    start();
  }
};

// The default script with its first token `ttft_ms` after arrival and a token every `itl_ms`.
inline ScriptedSseOptions scripted_timing(double ttft_ms, double itl_ms) {
  ScriptedSseOptions options;
  options.ttft_ms = ttft_ms;
  options.itl_ms = itl_ms;
  return options;
}

// `endpoint` on 127.0.0.1:`port`, asking for `model`.
inline BenchTarget target_at(int port, std::string model = "scripted",
                             Endpoint endpoint = Endpoint::kCompletions) {
  BenchTarget target;
  target.url = "http://127.0.0.1:" + std::to_string(port);
  target.model = std::move(model);
  target.endpoint = {"127.0.0.1", port, endpoint_path(endpoint)};
  return target;
}

// Token-id prompts of exactly `isl` tokens asking for `osl` tokens.
inline WorkloadSpec workload_of(int isl, int osl) {
  WorkloadSpec workload;
  workload.isl = isl;
  workload.osl = osl;
  return workload;
}

// `concurrency` requests in flight per target, `requests` measured, no warm-up.
inline LoadPoint closed_loop_point(int concurrency, int requests) {
  LoadPoint point;
  point.concurrency = concurrency;
  point.requests = requests;
  point.warmup = 0;
  return point;
}

// Poisson arrivals at `request_rate` per second per target, at most `concurrency_cap` in flight
// (0: no cap), `requests` measured, no warm-up.
inline LoadPoint open_loop_point(double request_rate, int concurrency_cap, int requests) {
  LoadPoint point;
  point.open_loop = true;
  point.request_rate = request_rate;
  point.concurrency = concurrency_cap;
  point.requests = requests;
  point.warmup = 0;
  return point;
}

}  // namespace gpufrac
