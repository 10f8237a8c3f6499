// The "vs reference study" section of `gpufrac report`: our runs beside the study's numbers
// (reference_study.h), row by row, in three tables:
//
// - % of baseline: per requests-resident-per-GPU row of the study (2..32), our shared arm's tok/s
//   per GPU / our dedicated arm's (matched as in the main tables) beside the study's HAMi % and
//   fractions %. Our timeslice arm is the HAMi-equivalent.
// - latency: TTFT p50 and ITL p50 of each arm, ours beside the study's, same rows.
// - equal concurrency (the study's appendix view): per c per model (1..32), our shared tok/s per
//   GPU / dedicated tok/s per GPU beside the study's node tok/s ratio (its arms all ran 8 GPUs).
//
// Only shared arms at the study's 2 models per GPU are compared, with one column per such group
// (a group per GPU count); an arm we did not run keeps its columns, with "—" for ours. Rows are
// the study's; a row we did not run prints "—" on our side. Plain values, no shared state.
#pragma once

#include <string>
#include <vector>

#include "report/arm_groups.h"
#include "report/table.h"

namespace gpufrac {

struct StudyComparison {
  std::string note;           // paragraph under the section heading: both setups
  std::vector<Table> tables;  // % of baseline, latency, equal concurrency; empty: no section
};

// Empty unless the set holds a dedicated arm and a shared arm at 2 models per GPU, both with
// closed-loop points (the study's setup).
StudyComparison compare_with_reference_study(const ResultSet& set);

}  // namespace gpufrac
