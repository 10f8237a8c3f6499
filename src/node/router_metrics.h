// The router's per-model counters and GET /metrics on the router (Prometheus text format):
//   gpufrac:node_engine_restarts_total{model}      engine restarts (all replicas), from the
//   supervisor gpufrac:node_ready_replicas{model}             replicas that serve now
//   gpufrac:node_requests_waiting{model}           requests held now, waiting for a ready replica
//   gpufrac:node_requests_in_flight{model}         requests accepted and not finished (held ones
//                                                  included): what max_requests_in_flight limits
//   gpufrac:node_requests_total{model}             requests routed
//   gpufrac:node_held_requests_total{model}        requests that had to wait for a ready replica
//   gpufrac:node_retried_requests_total{model}     requests sent again after their engine failed
//                                                  before any of the reply reached the client
//   gpufrac:node_resumed_streams_total{model}      streams resumed after their engine was cut off
//   gpufrac:node_failed_requests_total{model,reason}  requests that did not get (all of) their
//       reply: wait_timeout (no replica ready within restart_wait), queue_full, model_failed,
//       engine_failed (a 502, or a stream cut that could not be resumed), in_flight_limit and
//       rate_limit (429: over max_requests_in_flight, over requests_per_second)
// Counters are atomics: bumped from any thread, read by the renderer.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace gpufrac {

struct ModelCounters {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> held{0};
  std::atomic<uint64_t> retried{0};
  std::atomic<uint64_t> resumed{0};
  std::atomic<uint64_t> failed_wait_timeout{0};
  std::atomic<uint64_t> failed_queue_full{0};
  std::atomic<uint64_t> failed_model_failed{0};
  std::atomic<uint64_t> failed_engine{0};
  std::atomic<uint64_t> rejected_in_flight{0};
  std::atomic<uint64_t> rejected_rate{0};
};

struct ModelMetricsRow {
  std::string model;
  const ModelCounters* counters = nullptr;
  int restarts = 0;
  int ready_replicas = 0;
  size_t waiting = 0;
  int in_flight = 0;
};

std::string render_router_metrics(const std::vector<ModelMetricsRow>& rows);

}  // namespace gpufrac
