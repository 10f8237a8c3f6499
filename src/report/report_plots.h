// The plots of `gpufrac report`, as svg_plot.h Plot values built from grouped run points:
//
// - throughput: tok/s per GPU vs requests resident per GPU (log2), a line per arm group;
// - latency: ITL p50 vs tok/s per GPU, a line per arm group (closed loop, one point per c);
// - per arm: ITL p50 and ITL p90 vs tok/s per GPU of one group, closed-loop and open-loop points
//   as separate lines (a line only where the group has such points).
//
// Points missing a coordinate are left out. Plain values, no shared state.
#pragma once

#include <string>

#include "report/arm_groups.h"
#include "report/svg_plot.h"

namespace gpufrac {

Plot throughput_plot(const ResultSet& set);
Plot latency_plot(const ResultSet& set);
Plot arm_latency_plot(const ArmGroup& group);

// "itl-vs-tok-s-per-gpu-<key>.svg"
std::string arm_latency_plot_file(const ArmGroup& group);

}  // namespace gpufrac
