// Summary statistics of a sample, as every gpufrac result file reports them: count, mean, min,
// max, std and the percentiles p1..p99, computed the way numpy does by default (percentiles by
// linear interpolation between closest ranks, std with ddof = 0), so numbers compare 1:1 with
// AIPerf and with a notebook. Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "common/json.h"

namespace gpufrac {

// The percentiles every STATS object carries, in order.
inline constexpr std::array<int, 9> kReportedPercentiles = {1, 5, 10, 25, 50, 75, 90, 95, 99};

struct Stats {
  size_t count = 0;
  double mean = 0, min = 0, max = 0, std = 0;
  std::array<double, kReportedPercentiles.size()> percentiles{};  // matches kReportedPercentiles

  double p50() const { return percentiles[4]; }
  // The value for one of kReportedPercentiles (throws std::out_of_range for any other).
  double percentile(int p) const;
};

// numpy.percentile(values, q) with the default method ("linear"): rank q/100 * (n-1), interpolated
// between its neighbours. `sorted` must be ascending and non-empty; q in [0, 100].
double percentile_of_sorted(const std::vector<double>& sorted, double q);

// All statistics of `values` (any order). An empty sample gives count 0 and zeros elsewhere;
// to_json writes it with nulls so no one mistakes "no data" for 0 ms.
Stats compute_stats(std::vector<double> values);

// {"count", "mean", "min", "max", "std", "p1", ..., "p99"} (docs/result-format.md, STATS).
Json stats_to_json(const Stats& stats);

}  // namespace gpufrac
