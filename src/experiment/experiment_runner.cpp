#include "experiment/experiment_runner.h"

#include <atomic>
#include <csignal>
#include <filesystem>

#include "common/error.h"
#include "experiment/experiment_plan.h"
#include "experiment/experiment_report.h"
#include "experiment/node_session.h"
#include "experiment/packing_search.h"
#include "experiment/progress_clock.h"
#include "node/gpus.h"

namespace gpufrac {
namespace {

std::atomic<int> g_signal{0};

void on_signal(int signal) { g_signal = signal; }

// Installs SIGINT/SIGTERM handlers for the experiment's lifetime; bench polls the flag.
class InterruptGuard {
 public:
  InterruptGuard() {
    g_signal = 0;
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~InterruptGuard() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  static bool interrupted() { return g_signal != 0; }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

}  // namespace

int run_experiment(const ExperimentSpec& spec, const ExperimentOptions& options, std::ostream& out) {
  MachineInventory machine = discover_machine();
  check_gpu_count(spec, machine);
  InterruptGuard guard;
  std::filesystem::create_directories(spec.output);
  std::vector<NodeRunPlan> plans = plan_runs(spec);
  int total_points = 0;
  for (const NodeRunPlan& p : plans) total_points += p.points();
  ProgressClock clock(total_points, options.progress);
  out << "gpufrac experiment: " << spec.name << " (" << options.spec_name << "), " << total_points
      << " point(s) to run on " << where_arms_run(spec, machine) << ", results in " << spec.output
      << "\n";
  std::vector<std::string> result_dirs;
  for (const NodeRunPlan& plan : plans) {
    result_dirs.push_back(arm_directory(spec.output, plan.arm, plan.models_per_gpu));
    if (plan.points() == 0) continue;
    BenchConfig config = experiment_bench_config(spec, plan.arm, plan.models_per_gpu, plan.out_dir);
    run_node_session(spec, plan.arm, plan.models_per_gpu, config,
                     {plan.concurrency, plan.rates}, options, InterruptGuard::interrupted, &clock,
                     &out);
    if (InterruptGuard::interrupted()) {
      out << "interrupted: the node is down; run the same command again to resume\n";
      return 130;
    }
  }
  std::string packing_markdown;
  if (spec.packing_search) {
    PackingSearchResult search = run_packing_search(spec, options, InterruptGuard::interrupted);
    if (InterruptGuard::interrupted()) {
      out << "interrupted during the packing search; run the same command again to resume\n";
      return 130;
    }
    packing_markdown = packing_search_markdown(spec, search);
  }
  std::vector<std::string> existing;
  for (const std::string& dir : result_dirs) {
    if (std::filesystem::exists(dir)) existing.push_back(dir);
  }
  if (existing.empty()) throw RuntimeFailure("no results were produced under " + spec.output);
  write_experiment_report(spec, existing, packing_markdown, out);
  return 0;
}

}  // namespace gpufrac
