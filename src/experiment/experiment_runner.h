// Runs an experiment spec end to end: for each run (arm x packing) bring a node up with
// `models_per_gpu x gpus` copies of the model on their fractions, wait until healthy, drive every
// model at once through the node's router with `gpufrac bench` one point at a time, take the node
// down; then the packing search (open loop, the largest packing that meets the SLO); then the
// report. Finished points (their summary.json exists) are not run again, so a run resumes where
// it stopped. SIGINT/SIGTERM stop the current point, take the node down and return.
//
// Output layout under spec.output: <arm>-m<m>/c<c>/ and <arm>-m<m>/r<rate>/ (bench's result
// directories), packing/<arm>-m<m>/r<rate>/ for the search's probes, packing.json, and report/.
// Single-threaded; one experiment per process.
#pragma once

#include <ostream>
#include <string>

#include "experiment/experiment_spec.h"

namespace gpufrac {

struct ExperimentOptions {
  std::string gpufrac_binary;  // runs `gpufrac serve`; empty: this executable
  std::string spec_name;       // recorded with the results ("embedded:gpu", a file name)
  bool progress = true;        // a live line per point on stderr
};

// Returns the process exit code: 0 done, 1 failed, 130 interrupted.
int run_experiment(const ExperimentSpec& spec, const ExperimentOptions& options,
                   std::ostream& out);

}  // namespace gpufrac
