// The engines' counters that tell memory pressure apart, summed over a node's engines: KV
// preemptions (vllm:num_preemptions_total: a running request's blocks freed and recomputed, the
// sign of thrash) and elastic KV backing refusals (gpufrac:kv_cache_backing_refusals_total: a
// request waited for device memory). Scraped from each engine's /metrics before and after a run
// point; the difference is written beside the point's summary.json as engine-counters.json and
// read back by the packing search to say why a probe failed. Called from one thread.
#pragma once

#include <string>
#include <vector>

#include "node/supervisor.h"

namespace gpufrac {

struct EngineCounters {
  double preemptions = 0;
  double backing_refusals = 0;
  int engines = 0;  // engines that answered /metrics
};

// Sums the counters of a Prometheus text exposition (every label set of each counter).
EngineCounters parse_engine_counters(const std::string& metrics_text);

// GETs each instance's /metrics (instance.url), 5 s each; an engine that does not answer is left out.
EngineCounters scrape_engine_counters(const std::vector<InstanceStatus>& instances);

EngineCounters operator-(const EngineCounters& after, const EngineCounters& before);

// engine-counters.json in `point_dir`; read_engine_counters returns false when there is none.
void write_engine_counters(const std::string& point_dir, const EngineCounters& counters);
bool read_engine_counters(const std::string& point_dir, EngineCounters& counters);

}  // namespace gpufrac
