#include "k8s/agent_command.h"

#include <signal.h>

#include <cstring>
#include <iostream>

#include "common/cli_args.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/http_server.h"
#include "common/log.h"
#include "common/strings.h"
#include "k8s/agent_layout.h"
#include "k8s/agent_metrics.h"
#include "k8s/agent_socket.h"
#include "k8s/node_agent.h"

namespace gpufrac::k8s {
namespace {

// The machine's GPUs, or the ones --gpus names (indexes or UUIDs).
std::vector<GpuInfo> served_gpus(const std::string& wanted) {
  MachineInventory machine = discover_machine();
  if (!machine.nvml_loaded) {
    throw RuntimeFailure("no GPUs: " + machine.nvml_status +
                         "; the agent runs on GPU nodes, in a container of the " +
                         "nvidia runtime class with NVIDIA_VISIBLE_DEVICES=all");
  }
  if (wanted == "all") return machine.gpus;
  std::vector<GpuInfo> gpus;
  for (const std::string& id : split(wanted, ',')) {
    auto it = std::find_if(machine.gpus.begin(), machine.gpus.end(), [&](const GpuInfo& g) {
      return std::to_string(g.index) == id || g.uuid == id;
    });
    if (it == machine.gpus.end())
      throw UsageError("--gpus: this node has no GPU '" + id + "'; see gpufrac gpus");
    gpus.push_back(*it);
  }
  return gpus;
}

std::pair<std::string, int> parse_listen(const std::string& listen) {
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos)
    throw UsageError("--listen: '" + listen + "' is not HOST:PORT, e.g. 0.0.0.0:9402");
  return {listen.substr(0, colon), int(parse_int(listen.substr(colon + 1), "--listen port"))};
}

}  // namespace

int agent_command(int argc, char** argv) {
  CliArgs args(
      "gpufrac k8s agent [OPTIONS]",
      "The node agent of a KAI-scheduled cluster (the gpufrac-agent DaemonSet): one MPS control\n"
      "daemon per GPU of this node, its pipe and log directories under ROOT/mps/<GPU UUID>/,\n"
      "restarted when it dies; ready only while every daemon answers; Prometheus metrics per\n"
      "GPU (MPS servers, clients, GPU memory per process); answers `gpufrac k8s exec`'s\n"
      "\"is this process an MPS client?\" across PID namespaces on ROOT/agent.sock. SIGTERM\n"
      "stops its daemons.");
  args.option("root", "DIR", "The host directory shared with the model pods.", kDefaultAgentRoot)
      .option("listen", "HOST:PORT", "Where /ready, /healthz and /metrics answer.",
              "0.0.0.0:" + std::to_string(kAgentPort))
      .option("gpus", "LIST", "The GPUs to serve: all, or indexes/UUIDs like 0,1.", "all")
      .option("client-uid", "UID", "The user the model pods run as: it gets the MPS directories.",
              std::nullopt)
      .option("mps-control", "PATH",
              "nvidia-cuda-mps-control [default: $GPUFRAC_MPS_CONTROL, else on PATH].",
              std::nullopt)
      .option("check-interval", "DURATION", "How often each daemon is checked.", "1s")
      .section("Example",
               "  gpufrac k8s agent --root /run/gpufrac --listen 0.0.0.0:9402 --client-uid 1000");
  if (!args.parse(argc, argv)) return 0;
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts
  ::signal(SIGPIPE, SIG_IGN);

  AgentOptions options;
  options.root = args.get("root");
  options.control_program =
      find_mps_control(args.given("mps-control") ? args.get("mps-control") : "");
  if (args.given("client-uid"))
    options.client_uid = uid_t(parse_int(args.get("client-uid"), "--client-uid"));
  options.check_interval_s = parse_seconds(args.get("check-interval"), "--check-interval");
  auto [host, port] = parse_listen(args.get("listen"));

  std::vector<GpuInfo> gpus = served_gpus(args.get("gpus"));
  size_t gpu_count = gpus.size();
  std::unique_ptr<NodeAgent> agent = NodeAgent::start(options, std::move(gpus));
  AgentSocket socket(agent_socket_path(options.root), [&](const Json& request, pid_t asker) {
    return agent->answer(request, asker);
  });
  HttpServer server(HttpServerOptions{host, port});
  NodeAgent* a = agent.get();
  double stale_after_s = std::max(30.0, 10 * options.check_interval_s);
  server.route("GET", "/ready", [a](const HttpRequest&, std::shared_ptr<HttpResponse> response) {
    Json not_ready = Json::array();
    for (const AgentGpu& gpu : a->snapshot().gpus) {
      if (!gpu.answering) not_ready.push_back({{"gpu", gpu.uuid}, {"error", gpu.error}});
    }
    bool ready = a->ready();
    response->send(ready ? 200 : 503, "application/json",
                   Json{{"ready", ready}, {"not_ready", not_ready}}.dump());
  });
  server.route("GET", "/healthz",
               [a, stale_after_s](const HttpRequest&, std::shared_ptr<HttpResponse> response) {
                 bool fresh =
                     monotonic_ns() - a->snapshot().checked_ns < int64_t(stale_after_s * 1e9);
                 response->send(fresh ? 200 : 503, "text/plain",
                                fresh ? "ok\n" : "the agent's checks stopped\n");
               });
  server.route("GET", "/metrics", [a](const HttpRequest&, std::shared_ptr<HttpResponse> response) {
    response->send(200, "text/plain; version=0.0.4", agent_metrics_text(a->snapshot(), a->ready()));
  });
  server.start();
  log_info("gpufrac k8s agent: ", gpu_count, " GPU(s) under ", options.root, ", metrics on ", host,
           ":", server.port());

  siginfo_t info;
  while (sigwaitinfo(&signals, &info) < 0) {
  }
  log_info("gpufrac k8s agent: ", strsignal(info.si_signo), ": stopping the MPS daemons");
  server.stop();
  agent->stop();
  return 0;
}

}  // namespace gpufrac::k8s
