#include "report/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace gpufrac {
namespace {

constexpr double kWidth = 780, kHeight = 460;
constexpr double kLeft = 80, kRight = 220, kTop = 50, kBottom = 70;  // margins around the plot
constexpr const char* kColors[] = {"#4d4d4d", "#d95f02", "#1b6ac9", "#1b9e77",
                                   "#7570b3", "#e7298a", "#a6761d"};

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", value);
  return text;
}

// Decimals needed to print every tick of this step exactly (2.5 -> 1, 0.25 -> 2, 50 -> 0).
int tick_decimals(double step) {
  for (int d = 0; d < 6; ++d) {
    double scaled = step * std::pow(10.0, d);
    if (std::fabs(scaled - std::round(scaled)) < 1e-6 * std::max(1.0, scaled)) return d;
  }
  return 6;
}

std::string tick_label(double value, int decimals) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

struct Axis {
  AxisTicks ticks;
  bool log2 = false;
  double pixel_low = 0, pixel_high = 0;  // where ticks.low and ticks.high land

  double to_pixel(double v) const {
    double a = log2 ? std::log2(ticks.low) : ticks.low;
    double b = log2 ? std::log2(ticks.high) : ticks.high;
    double x = log2 ? std::log2(v) : v;
    return pixel_low + (x - a) / (b - a) * (pixel_high - pixel_low);
  }
};

void draw_marker(std::ostringstream& out, int shape, double x, double y, const char* color) {
  switch (shape % 4) {
    case 0:
      out << "<circle cx=\"" << number(x) << "\" cy=\"" << number(y) << "\" r=\"4\" fill=\""
          << color << "\"/>\n";
      break;
    case 1:
      out << "<rect x=\"" << number(x - 3.5) << "\" y=\"" << number(y - 3.5)
          << "\" width=\"7\" height=\"7\" fill=\"" << color << "\"/>\n";
      break;
    case 2:
      out << "<polygon points=\"" << number(x) << "," << number(y - 4.5) << " " << number(x - 4.5)
          << "," << number(y + 3.5) << " " << number(x + 4.5) << "," << number(y + 3.5)
          << "\" fill=\"" << color << "\"/>\n";
      break;
    default:
      out << "<polygon points=\"" << number(x) << "," << number(y - 5) << " " << number(x + 5)
          << "," << number(y) << " " << number(x) << "," << number(y + 5) << " " << number(x - 5)
          << "," << number(y) << "\" fill=\"" << color << "\"/>\n";
  }
}

}  // namespace

AxisTicks linear_ticks(double min, double max) {
  if (min >= 0) min = 0;
  if (!(max > min)) max = min + 1;
  double raw_step = (max - min) / 5;
  double magnitude = std::pow(10.0, std::floor(std::log10(raw_step)));
  double step = magnitude * 10;
  for (double m : {1.0, 2.0, 2.5, 5.0}) {
    if (magnitude * m >= raw_step) {
      step = magnitude * m;
      break;
    }
  }
  AxisTicks axis;
  axis.low = std::floor(min / step + 1e-9) * step;
  axis.high = std::ceil(max / step - 1e-9) * step;
  if (axis.high <= axis.low) axis.high = axis.low + step;
  int count = int(std::lround((axis.high - axis.low) / step));
  for (int i = 0; i <= count; ++i) axis.ticks.push_back(axis.low + i * step);
  return axis;
}

AxisTicks log2_ticks(double min, double max) {
  int low = int(std::floor(std::log2(min) + 1e-9));
  int high = int(std::ceil(std::log2(max) - 1e-9));
  if (high <= low) high = low + 1;
  AxisTicks axis;
  axis.low = std::exp2(low);
  axis.high = std::exp2(high);
  for (int e = low; e <= high; ++e) axis.ticks.push_back(std::exp2(e));
  return axis;
}

std::string render_svg(const Plot& plot) {
  // Keep only drawable points.
  std::vector<PlotSeries> series;
  double x_min = INFINITY, x_max = -INFINITY, y_min = INFINITY, y_max = -INFINITY;
  for (const PlotSeries& s : plot.series) {
    PlotSeries kept{s.name, {}};
    for (auto [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y) || (plot.log2_x && x <= 0)) continue;
      kept.points.emplace_back(x, y);
      x_min = std::min(x_min, x), x_max = std::max(x_max, x);
      y_min = std::min(y_min, y), y_max = std::max(y_max, y);
    }
    if (!kept.points.empty()) series.push_back(std::move(kept));
  }

  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" << kWidth
      << "\" height=\"" << kHeight << "\" viewBox=\"0 0 " << kWidth << " " << kHeight
      << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << number((kLeft + kWidth - kRight) / 2) << "\" y=\"28\" "
      << "text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">" << escape(plot.title)
      << "</text>\n";
  const double plot_right = kWidth - kRight, plot_bottom = kHeight - kBottom;
  if (series.empty()) {
    out << "<text x=\"" << number((kLeft + plot_right) / 2) << "\" y=\""
        << number((kTop + plot_bottom) / 2) << "\" text-anchor=\"middle\">no data</text>\n"
        << "</svg>\n";
    return out.str();
  }

  Axis x_axis{plot.log2_x ? log2_ticks(x_min, x_max) : linear_ticks(x_min, x_max), plot.log2_x,
              kLeft, plot_right};
  Axis y_axis{linear_ticks(y_min, y_max), false, plot_bottom, kTop};
  double x_step = x_axis.ticks.ticks.size() > 1 ? x_axis.ticks.ticks[1] - x_axis.ticks.ticks[0] : 1;
  double y_step = y_axis.ticks.ticks.size() > 1 ? y_axis.ticks.ticks[1] - y_axis.ticks.ticks[0] : 1;
  int x_decimals = plot.log2_x ? tick_decimals(x_axis.ticks.low) : tick_decimals(x_step);
  int y_decimals = tick_decimals(y_step);

  out << "<g stroke=\"#e0e0e0\" stroke-width=\"1\">\n";
  for (double t : x_axis.ticks.ticks) {
    double x = x_axis.to_pixel(t);
    out << "<line x1=\"" << number(x) << "\" y1=\"" << number(kTop) << "\" x2=\"" << number(x)
        << "\" y2=\"" << number(plot_bottom) << "\"/>\n";
  }
  for (double t : y_axis.ticks.ticks) {
    double y = y_axis.to_pixel(t);
    out << "<line x1=\"" << number(kLeft) << "\" y1=\"" << number(y) << "\" x2=\""
        << number(plot_right) << "\" y2=\"" << number(y) << "\"/>\n";
  }
  out << "</g>\n<g stroke=\"black\" stroke-width=\"1\">\n"
      << "<line x1=\"" << number(kLeft) << "\" y1=\"" << number(plot_bottom) << "\" x2=\""
      << number(plot_right) << "\" y2=\"" << number(plot_bottom) << "\"/>\n"
      << "<line x1=\"" << number(kLeft) << "\" y1=\"" << number(kTop) << "\" x2=\"" << number(kLeft)
      << "\" y2=\"" << number(plot_bottom) << "\"/>\n";
  for (double t : x_axis.ticks.ticks) {
    double x = x_axis.to_pixel(t);
    out << "<line x1=\"" << number(x) << "\" y1=\"" << number(plot_bottom) << "\" x2=\""
        << number(x) << "\" y2=\"" << number(plot_bottom + 5) << "\"/>\n";
  }
  for (double t : y_axis.ticks.ticks) {
    double y = y_axis.to_pixel(t);
    out << "<line x1=\"" << number(kLeft - 5) << "\" y1=\"" << number(y) << "\" x2=\""
        << number(kLeft) << "\" y2=\"" << number(y) << "\"/>\n";
  }
  out << "</g>\n<g fill=\"black\">\n";
  for (double t : x_axis.ticks.ticks) {
    out << "<text x=\"" << number(x_axis.to_pixel(t)) << "\" y=\"" << number(plot_bottom + 20)
        << "\" text-anchor=\"middle\">" << tick_label(t, x_decimals) << "</text>\n";
  }
  for (double t : y_axis.ticks.ticks) {
    out << "<text x=\"" << number(kLeft - 9) << "\" y=\"" << number(y_axis.to_pixel(t) + 4)
        << "\" text-anchor=\"end\">" << tick_label(t, y_decimals) << "</text>\n";
  }
  out << "<text x=\"" << number((kLeft + plot_right) / 2) << "\" y=\"" << number(kHeight - 22)
      << "\" text-anchor=\"middle\" font-size=\"13\">" << escape(plot.x_label) << "</text>\n"
      << "<text transform=\"translate(22," << number((kTop + plot_bottom) / 2)
      << ") rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">" << escape(plot.y_label)
      << "</text>\n</g>\n";

  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = kColors[i % std::size(kColors)];
    out << "<g class=\"series\">\n<polyline fill=\"none\" stroke=\"" << color
        << "\" stroke-width=\"2\" points=\"";
    for (size_t k = 0; k < series[i].points.size(); ++k) {
      auto [x, y] = series[i].points[k];
      out << (k ? " " : "") << number(x_axis.to_pixel(x)) << "," << number(y_axis.to_pixel(y));
    }
    out << "\"/>\n";
    for (auto [x, y] : series[i].points) {
      draw_marker(out, int(i), x_axis.to_pixel(x), y_axis.to_pixel(y), color);
    }
    out << "</g>\n";
  }

  out << "<g class=\"legend\">\n";
  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = kColors[i % std::size(kColors)];
    double y = kTop + 12 + 22 * double(i);
    double x = plot_right + 20;
    out << "<line x1=\"" << number(x) << "\" y1=\"" << number(y) << "\" x2=\"" << number(x + 28)
        << "\" y2=\"" << number(y) << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>\n";
    draw_marker(out, int(i), x + 14, y, color);
    out << "<text x=\"" << number(x + 36) << "\" y=\"" << number(y + 4) << "\">"
        << escape(series[i].name) << "</text>\n";
  }
  out << "</g>\n</svg>\n";
  return out.str();
}

}  // namespace gpufrac
