#include "report/report_plots.h"

namespace gpufrac {
namespace {

using Metric = std::optional<double> RunPoint::*;

// (tok/s per GPU, metric) of each point that has both, in the given order.
PlotSeries latency_series(std::string name, const std::vector<RunPoint>& points, Metric metric) {
  PlotSeries s{std::move(name), {}};
  for (const RunPoint& p : points) {
    auto x = p.tok_s_per_gpu();
    const std::optional<double>& y = p.*metric;
    if (x && y) s.points.emplace_back(*x, *y);
  }
  return s;
}

}  // namespace

Plot throughput_plot(const ResultSet& set) {
  Plot plot{"Output tok/s per GPU vs requests resident per GPU",
            "requests resident per GPU",
            "output tok/s per GPU",
            /*log2_x=*/true,
            {}};
  for (const ArmGroup& g : set.groups) {
    PlotSeries s{g.label, {}};
    for (const RunPoint& p : g.closed) {
      if (auto y = p.tok_s_per_gpu()) s.points.emplace_back(p.requests_per_gpu(), *y);
    }
    plot.series.push_back(std::move(s));
  }
  return plot;
}

Plot latency_plot(const ResultSet& set) {
  Plot plot{"ITL p50 vs output tok/s per GPU (one point per concurrency)",
            "output tok/s per GPU",
            "ITL p50 (ms)",
            /*log2_x=*/false,
            {}};
  for (const ArmGroup& g : set.groups) {
    plot.series.push_back(latency_series(g.label, g.closed, &RunPoint::itl_p50_ms));
  }
  return plot;
}

Plot arm_latency_plot(const ArmGroup& group) {
  Plot plot{group.label + ": ITL vs output tok/s per GPU (" + std::to_string(group.models()) +
                " models, one point per concurrency or rate)",
            "output tok/s per GPU",
            "ITL (ms)",
            /*log2_x=*/false,
            {}};
  const std::pair<const std::vector<RunPoint>*, const char*> loads[] = {
      {&group.closed, "closed loop"}, {&group.open, "open loop"}};
  for (const auto& [points, load] : loads) {
    for (const auto& [metric, name] : {std::pair{&RunPoint::itl_p50_ms, "ITL p50"},
                                       std::pair{&RunPoint::itl_p90_ms, "ITL p90"}}) {
      PlotSeries s = latency_series(std::string(name) + ", " + load, *points, metric);
      if (!s.points.empty()) plot.series.push_back(std::move(s));
    }
  }
  return plot;
}

std::string arm_latency_plot_file(const ArmGroup& group) {
  return "itl-vs-tok-s-per-gpu-" + group.key + ".svg";
}

}  // namespace gpufrac
