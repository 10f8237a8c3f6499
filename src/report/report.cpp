#include "report/report.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "report/report_plots.h"
#include "report/report_tables.h"
#include "report/study_comparison.h"

namespace gpufrac {
namespace {

std::string join_ints(const std::vector<RunPoint>& points) {
  std::string out;
  for (const RunPoint& p : points)
    out += (out.empty() ? "" : ", ") + std::to_string(*p.concurrency);
  return out;
}

std::string inputs_section(const ResultSet& set) {
  std::ostringstream out;
  out << "## Inputs\n\n";
  for (const ArmGroup& g : set.groups) {
    out << "- **" << g.label << "**: " << g.arm << ", " << g.models_per_gpu << " model"
        << (g.models_per_gpu == 1 ? "" : "s") << " per GPU on " << g.gpus << " GPU"
        << (g.gpus == 1 ? "" : "s") << " (" << g.models() << " models)";
    if (!g.closed.empty()) out << "; closed loop at c = " << join_ints(g.closed) << " per model";
    if (!g.open.empty()) out << "; " << g.open.size() << " open-loop points";
    std::vector<std::string> gpu_names;
    for (const auto* points : {&g.closed, &g.open}) {
      for (const RunPoint& p : *points) {
        if (!p.gpu_name.empty() &&
            std::find(gpu_names.begin(), gpu_names.end(), p.gpu_name) == gpu_names.end()) {
          gpu_names.push_back(p.gpu_name);
        }
      }
    }
    for (size_t i = 0; i < gpu_names.size(); ++i) out << (i ? ", " : "; GPU ") << gpu_names[i];
    out << ".\n";
  }
  out << "\nRequests resident per GPU = models per GPU x concurrency per model. tok/s per GPU = "
         "the run's output tok/s / its GPUs.\n";
  return out.str();
}

int largest_run_models(const ResultSet& set) {
  int models = 1;
  for (const ArmGroup& g : set.groups) models = std::max(models, g.models());
  return models;
}

}  // namespace

Report build_report(const ResultSet& set, const ReportOptions& options) {
  Report report;
  std::ostringstream md;
  md << "# gpufrac report\n\n" << inputs_section(set) << "\n";

  md << "## Throughput and latency, matched on requests resident per GPU\n\n";
  std::vector<Table> throughput = throughput_tables(set);
  std::vector<Table> latency = latency_tables(set);
  if (throughput.empty()) {
    bool dedicated = set.dedicated() && !set.dedicated()->closed.empty();
    md << (dedicated ? "No shared arm" : "No dedicated arm")
       << " with closed-loop points among the inputs, so there is nothing to match; the per-arm "
          "rows below hold every point.\n\n";
  }
  for (size_t i = 0; i < throughput.size(); ++i) {
    for (Table* t : {&throughput[i], &latency[i]}) {
      md << render_markdown(*t) << "\n";
      report.tables.push_back(*t);
    }
  }

  StudyComparison study = compare_with_reference_study(set);
  if (!study.tables.empty()) {
    md << "## vs reference study\n\n" << study.note << "\n\n";
    for (Table& t : study.tables) {
      md << render_markdown(t) << "\n";
      report.tables.push_back(std::move(t));
    }
  }

  md << "## Cost\n\n";
  std::vector<int> cost_models = options.cost_models;
  if (cost_models.empty()) cost_models.push_back(largest_run_models(set));
  for (int models : cost_models) {
    Table t = cost_table(set, models, options.cost);
    md << render_markdown(t) << "\n";
    report.tables.push_back(std::move(t));
  }

  Table appendix = appendix_table(set);
  md << "## Appendix\n\n" << render_markdown(appendix) << "\n";
  report.tables.push_back(std::move(appendix));

  if (std::any_of(set.groups.begin(), set.groups.end(),
                  [](const ArmGroup& g) { return !g.open.empty(); })) {
    md << "## Open loop: latency vs offered rate\n\n";
    std::string verdicts;
    for (const ArmGroup& g : set.groups) {
      if (g.open.empty()) continue;
      Table t = open_loop_latency_table(g, options.slo);
      verdicts += "- **" + g.label + "** (" + std::to_string(g.models_per_gpu) + " per GPU, " +
                  std::to_string(g.models()) + " models): " + t.footnote + "\n";
      md << render_markdown(t) << "\n";
      report.tables.push_back(std::move(t));
    }
    md << "SLO summary:\n\n" << verdicts << "\n";
  }

  md << "## Per-arm rows\n\n";
  for (const ArmGroup& g : set.groups) {
    std::vector<Table> tables;
    if (!g.closed.empty()) tables.push_back(closed_loop_rows_table(g));
    if (!g.open.empty()) tables.push_back(open_loop_rows_table(g));
    for (Table& t : tables) {
      md << render_markdown(t) << "\n";
      report.tables.push_back(std::move(t));
    }
  }

  report.plots = {{kThroughputPlotFile, render_svg(throughput_plot(set))},
                  {kLatencyPlotFile, render_svg(latency_plot(set))}};
  md << "## Plots\n\n"
     << "![output tok/s per GPU vs requests resident per GPU](" << kThroughputPlotFile << ")\n\n"
     << "![ITL p50 vs output tok/s per GPU](" << kLatencyPlotFile << ")\n\n"
     << "Per arm, ITL p50 and p90 vs output tok/s per GPU:\n";
  for (const ArmGroup& g : set.groups) {
    std::string file = arm_latency_plot_file(g);
    report.plots.emplace_back(file, render_svg(arm_latency_plot(g)));
    md << "\n![" << g.label << ": ITL vs output tok/s per GPU](" << file << ")\n";
  }
  report.markdown = md.str();
  return report;
}

std::vector<std::string> write_report(const Report& report, const std::string& out_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw RuntimeFailure("--out " + out_dir + ": cannot create it: " + ec.message());
  std::vector<std::string> written;
  auto write = [&](const std::string& name, const std::string& text) {
    fs::path path = fs::path(out_dir) / name;
    std::ofstream out(path, std::ios::binary);
    out << text;
    out.close();
    if (!out) throw RuntimeFailure(path.string() + ": cannot write it (check --out)");
    written.push_back(path.string());
  };
  write("report.md", report.markdown);
  for (const Table& t : report.tables) write(t.id + ".csv", render_csv(t));
  for (const auto& [name, svg] : report.plots) write(name, svg);
  return written;
}

}  // namespace gpufrac
