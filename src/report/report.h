// `gpufrac report` as a library: grouped run points in, the whole report out — Markdown text,
// its tables (each also a CSV file) and SVG plots (two for all arms, one per arm group) — and the
// writer that puts them in a directory. Sections: inputs, matched throughput and latency, "vs
// reference study" (only for a dedicated arm plus a shared arm at 2 models per GPU), cost,
// appendix, open loop vs offered rate with the largest rate meeting options.slo (only with
// open-loop points), per-arm rows, plots. Reads and writes files only; never opens a socket.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "report/arm_groups.h"
#include "report/cost_model.h"
#include "report/open_loop.h"
#include "report/table.h"

namespace gpufrac {

struct ReportOptions {
  CostModel cost;
  std::vector<int> cost_models;  // N of each cost table; empty: the largest run's model count
  LatencySlo slo;                // for the open-loop tables: TTFT p90 and ITL p50 limits
};

struct Report {
  std::string markdown;       // report.md: every table, with headings and notes, and the plot links
  std::vector<Table> tables;  // in the order report.md shows them; each becomes <id>.csv
  std::vector<std::pair<std::string, std::string>> plots;  // (file name, SVG text)
};

inline constexpr const char* kThroughputPlotFile = "tok-s-per-gpu-vs-requests-per-gpu.svg";
inline constexpr const char* kLatencyPlotFile = "itl-p50-vs-tok-s-per-gpu.svg";

Report build_report(const ResultSet& set, const ReportOptions& options);

// Writes report.md, the CSV files and the plots into out_dir (created if needed); returns the
// paths written. A directory that cannot be written is a RuntimeFailure.
std::vector<std::string> write_report(const Report& report, const std::string& out_dir);

}  // namespace gpufrac
