// The packing search: the largest number of models per GPU that still meets the SLO when every
// model receives `rate` requests/s (open loop). Probes from the top, since light load is limited
// by memory before compute: the spec's maximum first, then one fewer while a packing does not
// even start (a node that cannot be brought up fails in seconds); the first packing that starts
// ends the search if it meets the SLO, else the one below it is probed (at light load the answer
// is usually there) and, if that misses too, the search bisects below it. A probe passes when the
// node started, every request completed and, for every model, TTFT p90 <= slo.ttft_p90_ms and
// ITL p50 <= slo.itl_p50_ms. Each probe is a node brought up, one open-loop point, the node down;
// its results stay in spec.output/packing/<arm>-m<m>/r<rate>/ and a probe whose summary exists is
// read instead of run again. The outcome is also written to spec.output/packing.json. A probe that
// fails says why (probe_limit): memory or compute.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "experiment/experiment_runner.h"
#include "experiment/experiment_spec.h"

namespace gpufrac {

struct PackingProbe {
  int models_per_gpu = 0;
  bool passed = false;
  double worst_ttft_p90_ms = 0;  // over the models
  double worst_itl_p50_ms = 0;
  int completed_requests = 0;
  int failed_requests = 0;
  std::string summary_path;
  bool started = true;     // false: the node could not be brought up (see not_started_reason)
  std::string not_started_reason;
  // The engines' KV preemptions and backing refusals during the probe (engine_counters.h);
  // -1: not recorded.
  double preemptions = -1;
  double backing_refusals = -1;
  // Why a probe failed, in words: "memory: ..." (did not start, KV thrash, waiting for KV
  // memory) or "compute: ..." (ITL over the SLO), or queueing; empty when it passed.
  std::string limit;
};

// The `limit` of a judged (or not started) probe.
std::string probe_limit(const PackingProbe& probe, const ExperimentSlo& slo);

struct PackingSearchResult {
  std::vector<PackingProbe> probes;  // in the order they ran
  int largest_passing = 0;           // 0: not even one model per GPU meets the SLO
};

// Judges one probe's summary.json against the SLO.
PackingProbe judge_probe(const std::string& summary_path, int models_per_gpu,
                         const ExperimentSlo& slo);

// `probe` runs (or reads) one packing and returns its verdict; the search decides which packings.
PackingSearchResult search_packings(int max_models_per_gpu,
                                    const std::function<PackingProbe(int)>& probe,
                                    const std::function<bool()>& interrupted);

PackingSearchResult run_packing_search(const ExperimentSpec& spec,
                                       const ExperimentOptions& options,
                                       const std::function<bool()>& interrupted);

std::string packing_search_markdown(const ExperimentSpec& spec, const PackingSearchResult& result);

}  // namespace gpufrac
