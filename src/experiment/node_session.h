// One node session of an experiment: bring the node of (arm, models per GPU) up, drive the given
// run points through its router one at a time with bench (every model at once), take it down —
// also when a point throws or the run is interrupted. Used by the sweep and the packing search.
// Each finished point's directory also gets engine-counters.json (engine_counters.h).
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "bench/bench_run.h"
#include "common/error.h"
#include "experiment/experiment_runner.h"
#include "experiment/progress_clock.h"

namespace gpufrac {

// Thrown when the node itself could not be brought up (placement refused it, or a model exited or
// stayed unhealthy while starting, e.g. more models than the GPU's memory holds). Nothing of the
// node is left running.
class NodeDidNotStart : public RuntimeFailure {
 public:
  using RuntimeFailure::RuntimeFailure;
};

struct SessionPoints {
  std::vector<int> concurrency;  // closed loop
  std::vector<double> rates;     // open loop
};

// `config` carries everything but the targets and the point; `clock` and `table_out` may be null.
// Stops between points (and bench stops within one) once `interrupted` returns true. Throws
// NodeDidNotStart when Node::up fails; other failures propagate as they are.
void run_node_session(const ExperimentSpec& spec, const std::string& arm, int models_per_gpu,
                      const BenchConfig& config, const SessionPoints& points,
                      const ExperimentOptions& options, const std::function<bool()>& interrupted,
                      ProgressClock* clock, std::ostream* table_out);

}  // namespace gpufrac
