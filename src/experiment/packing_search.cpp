#include "experiment/packing_search.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/json.h"
#include "common/log.h"
#include "experiment/engine_counters.h"
#include "experiment/experiment_plan.h"
#include "experiment/node_session.h"

namespace gpufrac {
namespace {

double stat(const Json& metrics, const char* metric, const char* statistic) {
  const Json* m = metrics.contains(metric) ? &metrics.at(metric) : nullptr;
  if (!m || !m->contains(statistic) || !m->at(statistic).is_number()) return 1e300;
  return m->at(statistic).get<double>();
}

// A node's start failure reads "<who> exited: <status>; its log ends: <line> | ... | <line>"; the
// report keeps the failure and the log's last line (packing.json keeps all of it).
std::string last_log_line(const std::string& reason) {
  const std::string marker = "its log ends: ";
  size_t log = reason.find(marker);
  size_t last = reason.rfind(" | ");
  if (log == std::string::npos || last == std::string::npos || last < log) return reason;
  return reason.substr(0, log + marker.size()) + "... " + reason.substr(last + 3);
}

}  // namespace

PackingProbe judge_probe(const std::string& summary_path, int models_per_gpu,
                         const ExperimentSlo& slo) {
  std::ifstream file(summary_path);
  if (!file) throw RuntimeFailure("cannot read " + summary_path);
  Json summary = Json::parse(file, nullptr, false);
  if (summary.is_discarded() || !summary.contains("targets")) {
    throw RuntimeFailure(summary_path + " is not a bench summary (no targets)");
  }
  PackingProbe probe;
  probe.models_per_gpu = models_per_gpu;
  probe.summary_path = summary_path;
  for (const Json& target : summary.at("targets")) {
    const Json& metrics = target.at("metrics");
    probe.worst_ttft_p90_ms = std::max(probe.worst_ttft_p90_ms, stat(metrics, "ttft_ms", "p90"));
    probe.worst_itl_p50_ms = std::max(probe.worst_itl_p50_ms, stat(metrics, "itl_ms", "p50"));
    probe.completed_requests += metrics.value("completed", 0);
    probe.failed_requests += metrics.value("failed", 0);
  }
  probe.passed = !summary.at("targets").empty() && probe.failed_requests == 0 &&
                 probe.worst_ttft_p90_ms <= slo.ttft_p90_ms &&
                 probe.worst_itl_p50_ms <= slo.itl_p50_ms;
  EngineCounters counters;
  if (read_engine_counters(std::filesystem::path(summary_path).parent_path().string(), counters)) {
    probe.preemptions = counters.preemptions;
    probe.backing_refusals = counters.backing_refusals;
  }
  probe.limit = probe_limit(probe, slo);
  return probe;
}

std::string probe_limit(const PackingProbe& probe, const ExperimentSlo& slo) {
  char text[160];
  if (!probe.started) {
    const std::string& why = probe.not_started_reason;
    const bool memory =
        why.find("memory") != std::string::npos || why.find("cannot place") != std::string::npos;
    return memory ? "memory: did not start" : "did not start";
  }
  if (probe.passed) return "";
  // Thrash: on average every request was preempted (and recomputed) at least once.
  if (probe.preemptions > 0 && probe.preemptions >= probe.completed_requests) {
    std::snprintf(text, sizeof text, "memory: KV thrash (%.0f preemptions)", probe.preemptions);
    return text;
  }
  if (probe.failed_requests > 0) {
    std::snprintf(text, sizeof text, "%d request(s) failed", probe.failed_requests);
    return text;
  }
  if (probe.worst_itl_p50_ms > slo.itl_p50_ms) return "compute: ITL p50 over the SLO";
  if (probe.backing_refusals > 0) {
    std::snprintf(text, sizeof text, "memory: requests waited for KV memory (%.0f refusals)",
                  probe.backing_refusals);
    return text;
  }
  return "queueing: TTFT p90 over the SLO with ITL within it";
}

PackingSearchResult search_packings(int max_models_per_gpu,
                                    const std::function<PackingProbe(int)>& probe,
                                    const std::function<bool()>& interrupted) {
  PackingSearchResult result;
  auto run = [&](int m) {
    result.probes.push_back(probe(m));
    return result.probes.back();
  };
  int pass = 0;                       // the largest packing known to meet the SLO
  int fail = max_models_per_gpu + 1;  // the smallest packing known to miss it
  for (int m = max_models_per_gpu; m > 0 && !interrupted(); --m) {
    PackingProbe p = run(m);
    if (p.passed) {
      pass = m;
      break;
    }
    fail = m;
    if (p.started) break;
  }
  // The packing just below the first one that started and missed: at light load the answer is
  // usually there, and one probe beats a bisection from 0.
  if (pass == 0 && fail > 1 && fail <= max_models_per_gpu && !interrupted()) {
    if (run(fail - 1).passed) pass = fail - 1;
    else --fail;
  }
  while (fail - pass > 1 && !interrupted()) {
    int mid = pass + (fail - pass) / 2;
    if (run(mid).passed) pass = mid;
    else fail = mid;
  }
  result.largest_passing = pass;
  return result;
}

PackingSearchResult run_packing_search(const ExperimentSpec& spec,
                                       const ExperimentOptions& options,
                                       const std::function<bool()>& interrupted) {
  const PackingSearch& search = *spec.packing_search;
  std::string out_dir = spec.output + "/packing";
  auto probe = [&](int m) {
    BenchConfig config = experiment_bench_config(spec, search.arm, m, out_dir);
    config.open_loop = true;
    if (search.requests > 0) config.requests = search.requests;
    std::string summary = point_directory(config, 0, search.rate) + "/summary.json";
    if (!std::filesystem::exists(summary)) {
      try {
        run_node_session(spec, search.arm, m, config, {{}, {search.rate}}, options, interrupted,
                         nullptr, nullptr);
      } catch (const NodeDidNotStart& e) {
        log_warn("packing search: ", m, " model(s) per GPU did not start: ", e.what());
        PackingProbe p;
        p.models_per_gpu = m;
        p.started = false;
        p.not_started_reason = e.what();
        p.limit = probe_limit(p, spec.slo);
        return p;
      }
    }
    if (interrupted()) {
      PackingProbe unfinished;
      unfinished.models_per_gpu = m;
      return unfinished;
    }
    return judge_probe(summary, m, spec.slo);
  };
  PackingSearchResult result = search_packings(search.max_models_per_gpu, probe, interrupted);
  if (!interrupted()) {
    Json probes = Json::array();
    for (const PackingProbe& p : result.probes) {
      probes.push_back({{"models_per_gpu", p.models_per_gpu}, {"passed", p.passed},
                        {"worst_ttft_p90_ms", p.worst_ttft_p90_ms},
                        {"worst_itl_p50_ms", p.worst_itl_p50_ms},
                        {"failed_requests", p.failed_requests}, {"summary", p.summary_path},
                        {"started", p.started}, {"not_started_reason", p.not_started_reason},
                        {"preemptions", p.preemptions}, {"backing_refusals", p.backing_refusals},
                        {"limit", p.limit}});
    }
    Json record = {
        {"arm", search.arm},
        {"gpus", spec.gpus},
        {"rate_per_model", search.rate},
        {"slo", {{"ttft_p90_ms", spec.slo.ttft_p90_ms}, {"itl_p50_ms", spec.slo.itl_p50_ms}}},
        {"max_models_per_gpu", search.max_models_per_gpu},
        {"largest_passing_models_per_gpu", result.largest_passing},
        {"probes", probes}};
    std::ofstream(spec.output + "/packing.json") << record.dump(2) << "\n";
  }
  return result;
}

std::string packing_search_markdown(const ExperimentSpec& spec, const PackingSearchResult& result) {
  const PackingSearch& search = *spec.packing_search;
  std::ostringstream out;
  out << "## Packing search (open loop)\n\n";
  if (spec.gpus > 1) {
    out << "Each probe is one node of m models per GPU on all " << spec.gpus << " GPUs. ";
  }
  out << "Each model receives " << search.rate << " requests/s (ISL " << spec.isl << ", OSL "
      << spec.osl << "); SLO: TTFT p90 <= " << spec.slo.ttft_p90_ms
      << " ms and ITL p50 <= " << spec.slo.itl_p50_ms
      << " ms for every model, no failed request.\n\n"
      << "| models/GPU | worst TTFT p90 (ms) | worst ITL p50 (ms) | failed | meets SLO | limit |\n"
      << "|---:|---:|---:|---:|:---|:---|\n";
  std::vector<PackingProbe> probes = result.probes;
  std::sort(probes.begin(), probes.end(),
            [](const auto& a, const auto& b) { return a.models_per_gpu < b.models_per_gpu; });
  std::ostringstream not_started;
  char line[256];
  for (const PackingProbe& p : probes) {
    if (p.started) {
      std::snprintf(line, sizeof line, "| %d | %.1f | %.2f | %d | %s | %s |\n", p.models_per_gpu,
                    p.worst_ttft_p90_ms, p.worst_itl_p50_ms, p.failed_requests,
                    p.passed ? "yes" : "no", p.passed ? "—" : p.limit.c_str());
      out << line;
      continue;
    }
    out << "| " << p.models_per_gpu << " | — | — | — | no: did not start | " << p.limit << " |\n";
    not_started << "\n" << p.models_per_gpu << " model(s) per GPU did not start: "
                << last_log_line(p.not_started_reason) << "\n";
  }
  out << not_started.str();
  out << "\nLargest packing that meets the SLO: **" << result.largest_passing
      << " model(s) per GPU**";
  if (spec.gpus > 1 && result.largest_passing > 0) {
    out << ", " << result.largest_passing * spec.gpus << " models on " << spec.gpus << " GPUs";
  }
  out << " (searched up to " << search.max_models_per_gpu
      << "; dedicated serving needs one GPU per model).\n";
  return out.str();
}

}  // namespace gpufrac
