#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace gpufrac {

double Stats::percentile(int p) const {
  for (size_t i = 0; i < kReportedPercentiles.size(); ++i) {
    if (kReportedPercentiles[i] == p) return percentiles[i];
  }
  throw std::out_of_range("Stats: p" + std::to_string(p) + " is not a reported percentile");
}

double percentile_of_sorted(const std::vector<double>& sorted, double q) {
  double rank = q / 100.0 * double(sorted.size() - 1);
  size_t below = size_t(std::floor(rank));
  size_t above = std::min(below + 1, sorted.size() - 1);
  double fraction = rank - double(below);
  // numpy's _lerp: a + (b - a) * t, switched to b - (b - a) * (1 - t) above t = 0.5, which keeps
  // the result exact at the ends and monotone.
  double a = sorted[below], b = sorted[above];
  double diff = b - a;
  return fraction >= 0.5 ? b - diff * (1.0 - fraction) : a + diff * fraction;
}

Stats compute_stats(std::vector<double> values) {
  Stats stats;
  stats.count = values.size();
  if (values.empty()) return stats;
  std::sort(values.begin(), values.end());
  double sum = 0;
  for (double v : values) sum += v;
  stats.mean = sum / double(values.size());
  double squares = 0;
  for (double v : values) squares += (v - stats.mean) * (v - stats.mean);
  stats.std = std::sqrt(squares / double(values.size()));
  stats.min = values.front();
  stats.max = values.back();
  for (size_t i = 0; i < kReportedPercentiles.size(); ++i) {
    stats.percentiles[i] = percentile_of_sorted(values, kReportedPercentiles[i]);
  }
  return stats;
}

Json stats_to_json(const Stats& stats) {
  Json out;
  out["count"] = stats.count;
  auto value = [&](double v) { return stats.count == 0 ? Json(nullptr) : Json(v); };
  out["mean"] = value(stats.mean);
  out["min"] = value(stats.min);
  out["max"] = value(stats.max);
  out["std"] = value(stats.std);
  for (size_t i = 0; i < kReportedPercentiles.size(); ++i) {
    out["p" + std::to_string(kReportedPercentiles[i])] = value(stats.percentiles[i]);
  }
  return out;
}

}  // namespace gpufrac
