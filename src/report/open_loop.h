// Open-loop results in `gpufrac report`: latency percentiles against the offered request rate,
// and the largest offered rate that meets a latency SLO.
//
// A point meets the SLO when its TTFT p90 <= ttft_p90_ms, its ITL p50 <= itl_p50_ms and it
// reports zero failed requests; a missing number (TTFT p90, ITL p50 or failed) does not meet it.
// TTFT p90/p99 and ITL p90 are the mean over the run's models of each model's percentile, ITL
// and TTFT p50 the mean of the models' p50s (the study's convention; run_point.h). Rates are
// requests/s per model. Plain values, no shared state.
#pragma once

#include <string>

#include "report/arm_groups.h"
#include "report/table.h"

namespace gpufrac {

struct LatencySlo {
  double ttft_p90_ms = 1000;
  double itl_p50_ms = 30;

  bool met_by(const RunPoint& point) const;
  std::string describe() const;  // "TTFT p90 <= 1000 ms, ITL p50 <= 30 ms, no failed request"
};

// The open-loop point with the largest rate that meets the SLO; nullptr when none does.
const RunPoint* largest_rate_meeting(const ArmGroup& group, const LatencySlo& slo);

// One sentence: the largest rate meeting the SLO ("none of the measured rates" when none does),
// naming lower rates that miss it (a noisy or non-monotonic measurement).
std::string slo_verdict(const ArmGroup& group, const LatencySlo& slo);

// A row per open-loop point of the group (which has some), ascending rate; footnote: the verdict.
Table open_loop_latency_table(const ArmGroup& group, const LatencySlo& slo);

}  // namespace gpufrac
