#include "experiment/experiment_report.h"

#include "report/report.h"
#include "report/run_point.h"

namespace gpufrac {

void write_experiment_report(const ExperimentSpec& spec, const std::vector<std::string>& arm_dirs,
                             const std::string& extra_markdown, std::ostream& out) {
  ReportOptions options;
  options.cost.price_per_node_hour = spec.price_per_node_hour;
  options.cost.gpus_per_node = spec.gpus_per_node;
  options.cost_models = {spec.cost_models};
  ResultSet set = group_run_points(find_run_points(arm_dirs), {});
  Report report = build_report(set, options);
  if (!extra_markdown.empty()) report.markdown += "\n" + extra_markdown;
  std::string dir = spec.output + "/report";
  write_report(report, dir);
  out << "\n" << report.markdown << "\nReport, CSV tables and plots: " << dir << "/\n";
}

}  // namespace gpufrac
