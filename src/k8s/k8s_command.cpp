#include "k8s/k8s_command.h"

#include <cstring>
#include <iostream>
#include <sstream>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "k8s/agent_command.h"
#include "k8s/exec_command.h"
#include "k8s/render_command.h"
#include "k8s/router_command.h"

namespace gpufrac::k8s {
namespace {

struct Subcommand {
  std::string_view name;
  std::string_view summary;
  int (*run)(int argc, char** argv);
};

const std::vector<Subcommand> kSubcommands = {
    {"render", "write a node spec as Kubernetes manifests (a kustomize base) for KAI",
     render_command},
    {"exec", "a model container's entrypoint: the pod's GPU fraction enforced, fail closed",
     exec_command},
    {"agent", "the node agent: one MPS daemon per GPU, readiness, metrics, client checks",
     agent_command},
    {"router", "one address for every model: routes by \"model\" to the models' Services",
     router_command},
};

void print_help() {
  std::cout
      << "Usage: gpufrac k8s SUBCOMMAND [OPTIONS]\n\n"
         "gpufrac on a Kubernetes cluster scheduled by KAI-Scheduler: KAI places pods on GPU\n"
         "fractions, gpufrac enforces them on the node (MPS SM share + memory cap, fail "
         "closed).\n\n"
         "Subcommands:\n";
  for (const Subcommand& s : kSubcommands) {
    std::cout << "  " << s.name << std::string(9 - std::min<size_t>(8, s.name.size()), ' ')
              << s.summary << "\n";
  }
  std::cout << "\nRun 'gpufrac k8s SUBCOMMAND --help' for its options; docs/kubernetes.md walks "
               "through it.\n";
}

int report(std::string_view name, const std::exception& e, int code) {
  std::istringstream lines(e.what());
  for (std::string line; std::getline(lines, line);)
    std::cerr << "gpufrac k8s " << name << ": " << line << "\n";
  return code;
}

}  // namespace

int k8s_command(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    print_help();
    return argc < 2 ? 2 : 0;
  }
  std::string_view name = argv[1];
  for (const Subcommand& s : kSubcommands) {
    if (s.name != name) continue;
    try {
      return s.run(argc - 1, argv + 1);
    } catch (const UsageError& e) {
      return report(name, e, 2);
    } catch (const std::exception& e) {
      return report(name, e, 1);
    }
  }
  std::cerr << "gpufrac k8s: unknown subcommand '" << name
            << "' (run 'gpufrac k8s --help' for the list)\n";
  return 2;
}

}  // namespace gpufrac::k8s
