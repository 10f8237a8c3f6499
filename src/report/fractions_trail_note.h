// The line under a matched throughput table that says why fractions trail timeslice where they
// do (docs/result-format.md "How report derives its columns"). Rows are requests resident per
// GPU R; both shared arms run at c = R/m per model there, m = models per GPU.
//
// At equal c, tok/s per GPU relative to one model alone on a GPU (dedicated at c, per GPU):
//   E = fractions per model / dedicated    (what a model keeps of its speed on a 1/m share)
//   S = timeslice per GPU / dedicated      (what the m models taking turns keep together)
// fractions per GPU / timeslice per GPU = m x E / S exactly, so fractions trail iff m x E <= S.
// S is about 1 (one model at a time); m x E exceeds it where a model alone leaves much of the
// device idle, as a small batch leaves a GPU's SMs, and not where its step keeps every core of a
// CPU busy. The line names the trailing rows with E, m x E and S; a row without a dedicated point
// at c is named without them. Empty when fractions lead in every row both
// arms ran. Pure: reads the groups only.
#pragma once

#include <string>
#include <vector>

#include "report/arm_groups.h"

namespace gpufrac {

// `timeslice` and `fractions` run at the same models per GPU and GPU count.
std::string fractions_trail_note(const ArmGroup& dedicated, const ArmGroup& timeslice,
                                 const ArmGroup& fractions,
                                 const std::vector<int>& requests_per_gpu);

}  // namespace gpufrac
