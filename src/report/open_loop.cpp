#include "report/open_loop.h"

#include <cstdio>

namespace gpufrac {
namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::string rate_text(const RunPoint& p) {
  return number(*p.request_rate) + " req/s per model";
}

std::string plural(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

bool LatencySlo::met_by(const RunPoint& p) const {
  return p.ttft_p90_ms && *p.ttft_p90_ms <= ttft_p90_ms && p.itl_p50_ms &&
         *p.itl_p50_ms <= itl_p50_ms && p.failed && *p.failed == 0;
}

std::string LatencySlo::describe() const {
  return "TTFT p90 <= " + number(ttft_p90_ms) + " ms, ITL p50 <= " + number(itl_p50_ms) +
         " ms, no failed request";
}

const RunPoint* largest_rate_meeting(const ArmGroup& group, const LatencySlo& slo) {
  const RunPoint* best = nullptr;
  for (const RunPoint& p : group.open) {
    if (slo.met_by(p)) best = &p;  // ascending rate
  }
  return best;
}

std::string slo_verdict(const ArmGroup& group, const LatencySlo& slo) {
  const RunPoint* best = largest_rate_meeting(group, slo);
  std::string verdict = "Largest offered rate meeting the SLO (" + slo.describe() + "): ";
  if (!best) return verdict + "none of the measured rates.";
  verdict += rate_text(*best);
  std::string missed;
  for (const RunPoint& p : group.open) {
    if (&p == best) break;
    if (!slo.met_by(p)) missed += (missed.empty() ? "" : ", ") + number(*p.request_rate);
  }
  if (!missed.empty()) verdict += " (the lower rate(s) " + missed + " miss it: re-measure)";
  return verdict + ".";
}

Table open_loop_latency_table(const ArmGroup& group, const LatencySlo& slo) {
  Table t;
  t.id = "open-loop-" + group.key;
  t.title = "Open loop, " + group.label + ": " + plural(group.models_per_gpu, "model", "models") +
            " per GPU on " + plural(group.gpus, "GPU", "GPUs") + ", latency vs offered rate";
  t.note =
      "Requests arrive at the offered rate per model. TTFT and ITL p50: mean of the models' "
      "p50s; TTFT p90/p99 and ITL p90: mean of the models' p90s/p99s (the study's convention; "
      "a pooled percentile over all requests is in summary.json). served req/s per model = "
      "completed requests/s of all models / " +
      plural(group.models(), "model", "models") + "; output tok/s is all models together.";
  t.columns = {{"offered req/s per model", "request_rate", CellFormat::kFixed, 3},
               {"TTFT p50 (ms)", "ttft_p50_ms", CellFormat::kFixed, 1},
               {"TTFT p90 (ms)", "ttft_p90_ms", CellFormat::kFixed, 1},
               {"TTFT p99 (ms)", "ttft_p99_ms", CellFormat::kFixed, 1},
               {"ITL p50 (ms)", "itl_p50_ms", CellFormat::kFixed, 2},
               {"ITL p90 (ms)", "itl_p90_ms", CellFormat::kFixed, 2},
               {"served req/s per model", "request_throughput_per_model", CellFormat::kFixed, 3},
               {"output tok/s", "output_tok_s", CellFormat::kFixed, 0},
               {"failed", "failed", CellFormat::kFixed, 0}};
  for (const RunPoint& p : group.open) {
    Cell served;
    if (p.request_throughput) served = *p.request_throughput / group.models();
    t.rows.push_back({p.request_rate, p.ttft_p50_ms, p.ttft_p90_ms, p.ttft_p99_ms, p.itl_p50_ms,
                      p.itl_p90_ms, served, p.output_tok_s, p.failed});
  }
  t.footnote = slo_verdict(group, slo);
  return t;
}

}  // namespace gpufrac
