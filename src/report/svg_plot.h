// Line plots as standalone SVG 1.1 text, written by hand (no dependencies): axes with "nice"
// ticks and grid lines, axis labels, a title, one polyline with markers per series, and a legend
// to the right of the plot area. The x axis is linear or log2 (for requests per GPU: 1, 2, 4...).
// A linear axis starts at 0 when every value is non-negative, so ratios read honestly. Points with
// a non-finite coordinate (or x <= 0 on a log2 axis) are left out; a plot without any point says
// "no data". Text is XML-escaped. Plain values, no shared state.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace gpufrac {

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in this order
};

struct Plot {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log2_x = false;
  std::vector<PlotSeries> series;
};

struct AxisTicks {
  double low = 0;
  double high = 1;
  std::vector<double> ticks;  // ascending, from low to high
};

// About five steps of 1, 2, 2.5 or 5 x 10^k covering [min, max] (0 included when min >= 0).
AxisTicks linear_ticks(double min, double max);
// Powers of two covering [min, max]; min > 0.
AxisTicks log2_ticks(double min, double max);

std::string render_svg(const Plot& plot);

}  // namespace gpufrac
