#include "node/router_metrics.h"

#include <functional>

namespace gpufrac {
namespace {

using Value = std::function<uint64_t(const ModelMetricsRow&)>;

// One metric family: its HELP and TYPE lines, then per model one sample per (labels, value).
// Model names are letters, digits and . _ - : / (node_spec.cpp): nothing to escape in a label.
void family(std::string& out, const char* name, const char* type, const char* help,
            const std::vector<ModelMetricsRow>& rows,
            const std::vector<std::pair<const char*, Value>>& samples) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
  for (const auto& [labels, value] : samples) {
    for (const ModelMetricsRow& row : rows) {
      out.append(name).append("{model=\"").append(row.model).append("\"").append(labels);
      out.append("} ").append(std::to_string(value(row))).append("\n");
    }
  }
}

Value counter(const std::atomic<uint64_t> ModelCounters::*member) {
  return [member](const ModelMetricsRow& r) { return (r.counters->*member).load(); };
}

}  // namespace

std::string render_router_metrics(const std::vector<ModelMetricsRow>& rows) {
  std::string out;
  family(out, "gpufrac:node_engine_restarts_total", "counter", "Engine restarts, all replicas.",
         rows, {{"", [](const ModelMetricsRow& r) { return uint64_t(r.restarts); }}});
  family(out, "gpufrac:node_ready_replicas", "gauge", "Replicas serving now.", rows,
         {{"", [](const ModelMetricsRow& r) { return uint64_t(r.ready_replicas); }}});
  family(out, "gpufrac:node_requests_waiting", "gauge",
         "Requests held now, waiting for a ready replica.", rows,
         {{"", [](const ModelMetricsRow& r) { return uint64_t(r.waiting); }}});
  family(out, "gpufrac:node_requests_in_flight", "gauge",
         "Requests accepted and not finished, held ones included.", rows,
         {{"", [](const ModelMetricsRow& r) { return uint64_t(r.in_flight); }}});
  family(out, "gpufrac:node_requests_total", "counter", "Requests routed.", rows,
         {{"", counter(&ModelCounters::requests)}});
  family(out, "gpufrac:node_held_requests_total", "counter",
         "Requests that waited for a ready replica.", rows, {{"", counter(&ModelCounters::held)}});
  family(out, "gpufrac:node_retried_requests_total", "counter",
         "Requests sent again after their engine failed before any reply reached the client.", rows,
         {{"", counter(&ModelCounters::retried)}});
  family(out, "gpufrac:node_resumed_streams_total", "counter",
         "Streams resumed after their engine was cut off.", rows,
         {{"", counter(&ModelCounters::resumed)}});
  family(out, "gpufrac:node_failed_requests_total", "counter",
         "Requests that did not get all of their reply, by reason.", rows,
         {{",reason=\"wait_timeout\"", counter(&ModelCounters::failed_wait_timeout)},
          {",reason=\"queue_full\"", counter(&ModelCounters::failed_queue_full)},
          {",reason=\"model_failed\"", counter(&ModelCounters::failed_model_failed)},
          {",reason=\"engine_failed\"", counter(&ModelCounters::failed_engine)},
          {",reason=\"in_flight_limit\"", counter(&ModelCounters::rejected_in_flight)},
          {",reason=\"rate_limit\"", counter(&ModelCounters::rejected_rate)}});
  return out;
}

}  // namespace gpufrac
