#include "node/down_command.h"

#include <signal.h>

#include <iostream>
#include <thread>

#include "common/cli_args.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/strings.h"
#include "node/mps_daemon.h"
#include "node/node_state.h"
#include "node/process.h"

namespace gpufrac {
namespace {

ProcessId recorded_process(const Json& entry) {
  if (!entry.contains("pid") || !entry["pid"].is_number_integer()) return {};
  return {pid_t(entry["pid"].get<int64_t>()), entry.value("start_time", uint64_t(0))};
}

// Stops whatever the state records that is still alive; returns how many things it stopped.
int stop_leftovers(const Json& state, double grace_s) {
  int stopped = 0;
  for (const Json& model : state.value("models", Json::array())) {
    ProcessId process = recorded_process(model);
    if (!process.valid() || !process_group_alive(process)) continue;
    std::cerr << "gpufrac down: stopping model " << model.value("name", "?") << " (pid " << process.pid << ")\n";
    stop_process_group(process, grace_s, false);
    ++stopped;
  }
  for (const Json& entry : state.value("mps", Json::array())) {
    ProcessId process = recorded_process(entry);
    if (!process_alive(process)) continue;
    MpsDaemonConfig config{entry.value("control", ""), entry.value("uuid", ""),
                           entry.value("pipe_dir", ""), entry.value("log_dir", "")};
    std::cerr << "gpufrac down: quitting the MPS daemon of GPU " << entry.value("gpu", "?") << " (pid "
              << process.pid << ")\n";
    MpsDaemon(config, process).quit();
    ++stopped;
  }
  return stopped;
}

}  // namespace

int down_command(int argc, char** argv) {
  CliArgs args("gpufrac down [SPEC] [--name NAME | --run-dir DIR]",
               "Stops a node started by `gpufrac up`: the node drains its router (requests in flight\n"
               "finish, new ones get 503), stops its models and quits its MPS daemons. If the node\n"
               "process is gone (killed), down stops what it recorded itself. Only processes the node\n"
               "started are touched: each is named by pid and start time in RUN_DIR/state.json.");
  args.positional("SPEC", "The node's spec file (to find its name and run directory).")
      .option("name", "NAME", "The node's name (its run directory is the default one for that name).",
              "default")
      .option("run-dir", "DIR", "The node's run directory.", std::nullopt)
      .option("timeout", "SECONDS", "How long to wait for the node to drain and stop before killing it "
                                    "[default: the node's drain + stop timeouts + 30 s].", std::nullopt)
      .section("Examples",
               "  gpufrac down --name demo\n"
               "  gpufrac down node.yaml\n"
               "  gpufrac down --run-dir /tmp/gpufrac-0/demo --timeout 10");
  if (!args.parse(argc, argv)) return 0;
  std::string spec_path = args.positionals().empty() ? "" : args.positionals()[0];
  std::string run_dir = find_run_dir(spec_path, args.get("name"), args.given("run-dir") ? args.get("run-dir") : "");
  Json state = read_node_state(run_dir);
  if (state.is_null()) {
    throw RuntimeFailure("no node state in " + run_dir + "; is a node of that name running? " +
                         "(gpufrac status --name NAME, or give --run-dir)");
  }
  std::string name = state.value("name", "?");
  double grace = state.value("stop_timeout_s", 10.0);
  double timeout = args.given("timeout") ? parse_seconds(args.get("timeout"), "--timeout")
                                         : state.value("drain_timeout_s", 30.0) + grace + 30;
  bool was_alive = node_process_alive(state);
  if (was_alive) {
    ProcessId node = recorded_process(state["node"]);
    std::cerr << "gpufrac down: asking node '" << name << "' (pid " << node.pid << ") to drain and stop\n";
    ::kill(node.pid, SIGTERM);
    int64_t deadline = monotonic_ns() + int64_t(timeout * 1e9);
    while (process_alive(node) && monotonic_ns() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (process_alive(node)) {
      std::cerr << "gpufrac down: node '" << name << "' did not stop within " << timeout << " s; killing it\n";
      ::kill(node.pid, SIGKILL);
      while (process_alive(node)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    state = read_node_state(run_dir);  // what the node recorded last
  }
  int leftovers = stop_leftovers(state, grace);
  if (leftovers > 0 || state.value("state", "") != "stopped") {
    if (state.value("state", "") != "failed") state["state"] = "stopped";
    write_node_state(run_dir, state);
  }
  if (!was_alive && leftovers == 0) {
    std::cout << "node '" << name << "' is not running (state: " << state.value("state", "?") << ")\n";
  } else {
    std::cout << "node '" << name << "' is down" << (leftovers ? " (" + std::to_string(leftovers) +
                                                              " leftover process(es) stopped)" : "")
              << "\n";
  }
  return 0;
}

}  // namespace gpufrac
