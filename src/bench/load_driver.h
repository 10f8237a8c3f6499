// Drives one run point: all targets at once, each with its own stream set, on one StreamClient
// (one thread, epoll). Text prompts are built first, every one of the point's requests for every
// target, exact to the token with each target's POST /tokenize (text_prompts.h; a few counts at a
// time), so no tokenizer call overlaps the measurement. Warmup requests of every target run first
// and are all finished before the measured requests of any target start, so the measured window
// sees every model under load.
//
// Closed loop: `concurrency` requests in flight per target at all times; a finished request is
// replaced at once (its successor's scheduled time is the moment it ended). Open loop: arrivals
// per target at `request_rate` per second, gaps drawn from a gamma distribution of shape
// `burstiness` (1 = Poisson), seeded; with `concurrency` > 0 at most that many are in flight per
// target and later arrivals wait (their scheduled time stays the arrival time, so the wait shows
// as sent - scheduled).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/request_record.h"
#include "bench/workload.h"
#include "common/http_url.h"

namespace gpufrac {

struct BenchTarget {
  std::string url;    // as given, e.g. "http://127.0.0.1:8001"
  std::string model;  // the "model" field of every request
  HttpUrl endpoint;   // where requests go: host, port and /v1/... path
  std::string api_key;  // sent as "Authorization: Bearer KEY" with every request; "": none
};

struct LoadPoint {
  bool open_loop = false;
  int concurrency = 1;      // closed loop: in flight per target; open loop: cap (0 = none)
  double request_rate = 0;  // open loop, requests/s per target
  double burstiness = 1;    // open loop: gamma shape
  int requests = 40;        // measured requests per target
  int warmup = 2;           // warmup requests per target
};

struct PointProgress {
  bool preparing = false;  // building text prompts: finished/total count prompts
  bool warmup = false;
  int64_t finished = 0, total = 0, in_flight = 0, failed = 0;  // this phase, all targets
  int64_t output_tokens = 0;                                   // finished in this phase
  double elapsed_s = 0;                                        // since the phase started
};

struct PointRun {
  std::vector<RequestRecord> records;  // every request, sorted by (target, request_id)
  std::string start_time, end_time;    // UTC, ISO 8601
};

// Runs the point. `point_key` makes this point's prompts and arrivals differ from other points'.
// `on_progress`, when set, is called from the loop about every `progress_interval_s` (also while
// text prompts are built). Throws RuntimeFailure when text prompts cannot be built.
PointRun run_load_point(const std::vector<BenchTarget>& targets, const WorkloadSpec& workload,
                        const LoadPoint& point, uint64_t point_key, double request_timeout_s,
                        const std::function<void(const PointProgress&)>& on_progress = {},
                        double progress_interval_s = 0.25);

// Current UTC time as "2026-11-29T10:00:00Z".
std::string utc_now_iso();

}  // namespace gpufrac
