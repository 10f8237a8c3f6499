#include "experiment/experiment_command.h"

#include <iostream>

#include "common/cli_args.h"
#include "common/error.h"
#include "experiment/experiment_runner.h"
#include "experiment/experiment_spec.h"
#include "node/gpus.h"

namespace gpufrac {
namespace {

CliArgs experiment_args() {
  CliArgs args("gpufrac experiment [SPEC] [OPTIONS]",
               "The main job: serve a model dedicated (one per GPU), time-sliced (several per GPU,\n"
               "memory capped) and on GPU fractions (several per GPU, each with an MPS share of the\n"
               "SMs and a memory cap); drive every model at once over a load sweep with `gpufrac\n"
               "bench`; search the largest packing that meets an SLO; and print the reference\n"
               "study's tables (tok/s per GPU, % of baseline, TTFT/ITL, cost per 1M tokens).");
  args.positional("SPEC", "An experiment spec (YAML). Without it, the embedded default for this "
                          "machine: the study's workload\n      on qwen3-4b with an NVIDIA GPU, a "
                          "short tiny-model sweep on the CPU without one.")
      .option("output", "DIR", "Write results here instead of the spec's `output`.")
      .option("model", "MODEL", "Serve this preset or checkpoint directory instead of the spec's.")
      .flag("print-spec", "Print the spec that would run (the embedded default when no SPEC) and exit.")
      .flag("no-progress", "No progress lines on stderr.")
      .section("Resuming",
               "  Finished points (their summary.json exists) are not run again: after Ctrl-C or a\n"
               "  failure, run the same command to continue. Delete the output directory to start over.")
      .section("Examples",
               "  gpufrac experiment                      # the embedded default for this machine\n"
               "  gpufrac experiment --print-spec > my.yaml; $EDITOR my.yaml; gpufrac experiment my.yaml\n"
               "  gpufrac experiment experiments/h200-qwen3-4b.yaml --output /data/run1");
  return args;
}

}  // namespace

int experiment_command(int argc, char** argv) {
  CliArgs args = experiment_args();
  if (!args.parse(argc, argv)) return 0;
  if (args.positionals().size() > 1) throw UsageError("give at most one SPEC file");
  ExperimentOptions options;
  ExperimentSpec spec;
  if (args.positionals().empty()) {
    bool have_gpu = !discover_machine().gpus.empty();
    options.spec_name = default_experiment_name(have_gpu);
    if (args.flag_set("print-spec")) {
      std::cout << default_experiment_yaml(have_gpu);
      return 0;
    }
    spec = parse_experiment_spec(default_experiment_yaml(have_gpu), options.spec_name);
  } else {
    options.spec_name = args.positionals()[0];
    spec = load_experiment_spec(options.spec_name);
    if (args.flag_set("print-spec")) {
      std::cout << "# " << options.spec_name << " parses; it is run as written\n";
      return 0;
    }
  }
  if (args.given("output")) spec.output = args.get("output");
  if (args.given("model")) spec.model = args.get("model");
  options.progress = !args.flag_set("no-progress");
  return run_experiment(spec, options, std::cout);
}

}  // namespace gpufrac
