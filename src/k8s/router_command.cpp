#include "k8s/router_command.h"

#include <signal.h>

#include <cstring>

#include "common/cli_args.h"
#include "common/error.h"
#include "common/log.h"
#include "common/strings.h"
#include "k8s/agent_layout.h"
#include "k8s/cluster_router.h"

namespace gpufrac::k8s {

int router_command(int argc, char** argv) {
  CliArgs args(
      "gpufrac k8s router --upstream NAME=URL... [OPTIONS]",
      "One OpenAI-compatible address for every model of a cluster: routes each request by its\n"
      "\"model\" to that model's upstream (its Service), as `gpufrac up`'s router does on a node.\n"
      "URL is the model's health URL: a model is served while it answers 200.");
  args.option("upstream", "NAME=URL",
              "A model and its health URL, e.g. qwen-a=http://demo-qwen-a:8000/health.",
              std::nullopt, true)
      .option("listen", "HOST:PORT", "Where the router listens.",
              "0.0.0.0:" + std::to_string(kEnginePort))
      .option("drain-timeout", "DURATION", "How long requests in flight may take after SIGTERM.",
              "30s")
      .option("poll-interval", "DURATION", "How often each upstream's health URL is polled.", "1s")
      .option("restart-wait", "DURATION",
              "How long a request for a model that is not ready waits for it (then 503).", "30s")
      .option("api-keys-env", "NAME=VAR",
              "The keys that may call model NAME are in $VAR (separated by commas): every request "
              "then needs one (401), a key of another model gets 403. Give it for every model or "
              "for none.",
              std::nullopt, true)
      .option("max-requests-in-flight", "NAME=N",
              "At most N requests of model NAME at once; more get 429 with Retry-After.",
              std::nullopt, true)
      .option("requests-per-second", "NAME=R",
              "At most R requests per second of model NAME (bursts of max(1, R)); more get 429.",
              std::nullopt, true);
  if (!args.parse(argc, argv)) return 0;
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts
  ::signal(SIGPIPE, SIG_IGN);

  std::vector<Upstream> upstreams = parse_upstreams(args.get_all("upstream"));
  apply_access_flags(upstreams,
                     {args.get_all("api-keys-env"), args.get_all("max-requests-in-flight"),
                      args.get_all("requests-per-second")});
  std::string listen = args.get("listen");
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos)
    throw UsageError("--listen: '" + listen + "' is not HOST:PORT, e.g. 0.0.0.0:8000");
  HttpServerOptions options{listen.substr(0, colon),
                            int(parse_int(listen.substr(colon + 1), "--listen port"))};
  double drain_s = parse_seconds(args.get("drain-timeout"), "--drain-timeout");
  ClusterRouter router(options, upstreams,
                       parse_seconds(args.get("poll-interval"), "--poll-interval"),
                       parse_seconds(args.get("restart-wait"), "--restart-wait"));
  router.start();
  log_info("gpufrac k8s router: ", upstreams.size(), " model(s) on ", options.host, ":",
           router.port());
  siginfo_t info;
  while (sigwaitinfo(&signals, &info) < 0) {
  }
  log_info("gpufrac k8s router: ", strsignal(info.si_signo), ": draining (up to ", drain_s, " s)");
  router.stop(drain_s);
  return 0;
}

}  // namespace gpufrac::k8s
