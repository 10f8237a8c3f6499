#include "experiment/node_session.h"

#include <sstream>

#include "common/log.h"
#include "common/run_label.h"
#include "experiment/engine_counters.h"
#include "experiment/experiment_plan.h"
#include "node/node.h"

namespace gpufrac {

void run_node_session(const ExperimentSpec& spec, const std::string& arm, int models_per_gpu,
                      const BenchConfig& config, const SessionPoints& points,
                      const ExperimentOptions& options, const std::function<bool()>& interrupted,
                      ProgressClock* clock, std::ostream* table_out) {
  NodeOptions node_options;
  node_options.gpufrac_binary = options.gpufrac_binary;
  log_info("experiment: bringing up ", arm, " with ", models_per_gpu, " model(s) per GPU");
  std::unique_ptr<Node> node;
  try {
    node = Node::up(experiment_node_spec(spec, arm, models_per_gpu), node_options);
  } catch (const std::exception& e) {
    throw NodeDidNotStart(e.what());
  }
  BenchConfig base = config;
  base.targets.clear();
  for (const InstanceStatus& instance : node->instances()) {
    BenchTarget target;
    target.url = node->url();
    target.model = instance.model;
    target.endpoint = parse_http_url(node->url() + "/v1/completions", "node url");
    base.targets.push_back(target);
  }
  base.progress = options.progress;
  base.cancel = interrupted;
  std::string label = run_label(arm, models_per_gpu);
  auto run_point = [&](int concurrency, double rate) {
    BenchConfig point = base;
    point.open_loop = rate > 0;
    point.concurrencies = {concurrency};
    point.request_rates = point.open_loop ? std::vector<double>{rate} : std::vector<double>{};
    std::ostringstream name;
    name << label << (point.open_loop ? " rate " : " c=");
    if (point.open_loop) name << rate; else name << concurrency;
    if (clock) clock->begin_point(name.str());
    std::ostringstream table;
    const EngineCounters before = scrape_engine_counters(node->instances());
    try {
      run_bench(point, table);
    } catch (const BenchCancelled&) {
      return;  // interrupted: the caller stops and takes the node down
    }
    write_engine_counters(point_directory(point, concurrency, rate),
                          scrape_engine_counters(node->instances()) - before);
    if (clock) clock->end_point();
    if (table_out && !interrupted()) *table_out << table.str() << std::flush;
  };
  try {
    for (int c : points.concurrency) {
      if (interrupted()) break;
      run_point(c, 0);
    }
    for (double r : points.rates) {
      if (interrupted()) break;
      run_point(0, r);
    }
  } catch (...) {
    node->down();
    throw;
  }
  node->down();
}

}  // namespace gpufrac
