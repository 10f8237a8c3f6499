// gpufrac's entry point: argument dispatch to the subcommands, and the one place where a
// command's UsageError / RuntimeFailure becomes "gpufrac: message" and an exit code.
#include <cstring>
#include <exception>
#include <iostream>
#include <string_view>
#include <vector>

#include "bench/bench_command.h"
#include "common/error.h"
#include "engine/api/serve_command.h"
#include "experiment/experiment_command.h"
#include "k8s/k8s_command.h"
#include "memcap/memcap_command.h"
#include "node/down_command.h"
#include "node/gpus_command.h"
#include "node/status_command.h"
#include "node/up_command.h"
#include "report/report_command.h"

namespace {

struct Command {
  std::string_view name;
  std::string_view summary;
  int (*run)(int argc, char** argv);  // argv[0] is the subcommand's name
};

// One line per subcommand, in the order `gpufrac --help` lists them.
const std::vector<Command> kCommands = {
    {"experiment", "the main job: dedicated vs timeslice vs fractions, swept and reported", gpufrac::experiment_command},
    {"serve", "the built-in engine: one model, OpenAI-compatible HTTP, CUDA or CPU", gpufrac::serve_command},
    {"bench", "load generator: ISL/OSL, concurrency sweeps, many endpoints", gpufrac::bench_command},
    {"report", "study tables, cost per 1M tokens, plots from results", gpufrac::report_command},
    {"memcap", "run a command under a hard GPU memory cap", gpufrac::memcap_command},
    {"up", "start a node: models on GPU fractions behind one router", gpufrac::up_command},
    {"down", "drain and stop a node and everything it started", gpufrac::down_command},
    {"status", "a node's models: GPU, SM %, memory, state, restarts", gpufrac::status_command},
    {"gpus", "GPUs, SMs, memory, processes and MPS daemons here", gpufrac::gpus_command},
    {"k8s", "on a Kubernetes cluster with KAI: manifests, pod entrypoint, node agent", gpufrac::k8s::k8s_command},
};

void print_help() {
  std::cout << "gpufrac: serve many lightly used LLMs on few GPUs, each model on a fraction of a\n"
               "GPU (a share of the SMs through MPS and a hard memory cap), and measure what that\n"
               "costs in latency and saves in money.\n\nUsage: gpufrac COMMAND [OPTIONS]\n\n"
               "Commands:\n";
  for (const Command& c : kCommands) {
    std::cout << "  " << c.name << std::string(12 - std::min<size_t>(11, c.name.size()), ' ')
              << c.summary << "\n";
  }
  std::cout << "\nRun 'gpufrac COMMAND --help' for a command's options and examples.\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
      std::strcmp(argv[1], "help") == 0) {
    print_help();
    return argc < 2 ? 2 : 0;
  }
  std::string_view name = argv[1];
  for (const Command& c : kCommands) {
    if (c.name != name) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const gpufrac::UsageError& e) {
      std::cerr << "gpufrac " << name << ": " << e.what() << "\n";
      return 2;
    } catch (const std::exception& e) {
      std::cerr << "gpufrac " << name << ": " << e.what() << "\n";
      return 1;
    }
  }
  std::cerr << "gpufrac: unknown command '" << name << "' (run 'gpufrac --help' for the list)\n";
  return 2;
}
