#include "node/status_command.h"

#include <iostream>

#include "common/cli_args.h"
#include "common/error.h"
#include "node/node_state.h"

namespace gpufrac {

int status_command(int argc, char** argv) {
  CliArgs args(
      "gpufrac status [SPEC] [--name NAME | --run-dir DIR] [--json]",
      "Shows a node's models: GPU, sharing mode, SM % (and pinned cores on the CPU), memory\n"
      "cap (floor..ceiling for elastic memory) and memory in use now, state (starting, ready, "
      "restarting, stopping, stopped,\n"
      "failed), restarts, the restart backoff (it doubles while an engine keeps failing)\n"
      "and the engine's own URL. The router's URL is in the first line; a failed model's\n"
      "reason follows the table.");
  args.positional("SPEC", "The node's spec file (to find its name and run directory).")
      .option("name", "NAME", "The node's name.", "default")
      .option("run-dir", "DIR", "The node's run directory.", std::nullopt)
      .flag("json", "Print the state as JSON (the state file plus live memory use).")
      .section("Examples",
               "  gpufrac status --name demo\n"
               "      node 'demo': running, http://127.0.0.1:8000  (run dir /tmp/gpufrac-0/demo)\n"
               "      MODEL  GPU   MODE       SM%              MEM CAP  MEM USED  STATE  RESTARTS  "
               "BACKOFF  URL\n"
               "      a      0     fractions   50             69.5 GiB  41.2 GiB  ready         0  "
               "      -  http://127.0.0.1:41237\n"
               "      b      0     fractions   50        9 GiB..40 GiB  12.3 GiB  ready         0  "
               "      -  http://127.0.0.1:41239\n"
               "  gpufrac status --name demo --json | jq '.models[] | {name, state, restarts}'");
  if (!args.parse(argc, argv)) return 0;
  std::string spec_path = args.positionals().empty() ? "" : args.positionals()[0];
  std::string run_dir = find_run_dir(spec_path, args.get("name"), args.given("run-dir") ? args.get("run-dir") : "");
  Json state = read_node_state(run_dir);
  if (state.is_null()) {
    throw RuntimeFailure("no node state in " + run_dir + "; start one with gpufrac up SPEC, or give --name/--run-dir");
  }
  state = with_live_usage(std::move(state));
  if (args.flag_set("json")) std::cout << state.dump(2) << "\n";
  else std::cout << format_node_status(state);
  return 0;
}

}  // namespace gpufrac
