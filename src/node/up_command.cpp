#include "node/up_command.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <iostream>

#include "common/cli_args.h"
#include "common/error.h"
#include "common/strings.h"
#include "node/node.h"
#include "node/node_state.h"

namespace gpufrac {
namespace {

void apply_overrides(const CliArgs& args, NodeSpec& spec) {
  if (args.given("name")) spec.name = args.get("name");
  if (args.given("run-dir")) spec.run_dir = args.get("run-dir");
  if (args.given("listen")) {
    std::string listen = args.get("listen");
    size_t colon = listen.rfind(':');
    if (colon == std::string::npos) throw UsageError("--listen: '" + listen + "' is not HOST:PORT, e.g. 127.0.0.1:8000");
    spec.listen_host = listen.substr(0, colon);
    spec.listen_port = int(parse_int(listen.substr(colon + 1), "--listen port"));
  }
}

std::string down_hint(const NodeSpec& spec) {
  return spec.run_dir.empty() ? "gpufrac down --name " + spec.name : "gpufrac down --run-dir " + spec.run_dir;
}

// Runs the node until a signal or a fatal error; `on_up` runs once it is up.
int serve(const NodeSpec& spec, const std::string& spec_path, const std::function<void(Node&)>& on_up) {
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&signals, sig);
  // Before any thread starts, so that all of them leave these signals to the loop below.
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  NodeOptions options;
  options.spec_path = spec_path.empty() ? "" : std::filesystem::absolute(spec_path).string();
  std::unique_ptr<Node> node = Node::up(spec, options);
  on_up(*node);
  timespec tick{0, 200'000'000};
  while (!node->wait_for_stop(0)) {
    siginfo_t info;
    if (sigtimedwait(&signals, &info, &tick) > 0) {
      std::cerr << "gpufrac up: " << strsignal(info.si_signo) << ": stopping the node\n";
      node->request_stop();
    }
  }
  node->down();
  std::string error = node->error();
  if (!error.empty()) throw RuntimeFailure(error);
  return 0;
}

int serve_detached(const NodeSpec& spec, const std::string& spec_path) {
  std::string run_dir = std::filesystem::absolute(resolve_run_dir(spec)).string();
  std::filesystem::create_directories(run_dir);
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) throw RuntimeFailure("pipe failed");
  pid_t pid = ::fork();
  if (pid < 0) throw RuntimeFailure("fork failed");
  if (pid == 0) {
    ::close(report[0]);
    ::setsid();
    int log = ::open((run_dir + "/node.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int null = ::open("/dev/null", O_RDONLY);
    ::dup2(null, 0);
    ::dup2(log, 1);
    ::dup2(log, 2);
    auto tell = [&](const std::string& text) {
      ssize_t ignored = ::write(report[1], text.data(), text.size());
      (void)ignored;
    };
    try {
      return serve(spec, spec_path, [&](Node&) {
        tell("ok\n");
        ::close(report[1]);
      });
    } catch (const UsageError& e) {
      tell("2\n" + std::string(e.what()));
      std::cerr << "gpufrac up: " << e.what() << "\n";
      return 2;
    } catch (const std::exception& e) {
      tell("1\n" + std::string(e.what()));
      std::cerr << "gpufrac up: " << e.what() << "\n";
      return 1;
    }
  }
  ::close(report[1]);
  std::string answer;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(report[0], buffer, sizeof buffer)) > 0) answer.append(buffer, size_t(n));
  ::close(report[0]);
  if (answer == "ok\n") {
    std::cout << format_node_status(with_live_usage(read_node_state(run_dir)))
              << "\nThe node runs in the background (pid " << pid << ", log " << run_dir
              << "/node.log). Stop it with: " << down_hint(spec) << "\n";
    return 0;
  }
  if (answer.size() > 2 && (answer[0] == '1' || answer[0] == '2') && answer[1] == '\n') {
    std::string message = answer.substr(2);
    if (answer[0] == '2') throw UsageError(message);
    throw RuntimeFailure(message);
  }
  throw RuntimeFailure("the node process exited during startup; see " + run_dir + "/node.log");
}

}  // namespace

int up_command(int argc, char** argv) {
  CliArgs args("gpufrac up SPEC [OPTIONS]",
               "Starts a node: places every model of the node spec on the GPUs (or the CPU), starts\n"
               "one MPS control daemon per `fractions` GPU, starts each model's engine under its\n"
               "limits (SM share, memory cap, cores), waits until all are healthy (and, on MPS, attached\n"
               "to their GPU's daemon), and serves them all behind one OpenAI-compatible router that\n"
               "routes by the request's \"model\". A spec that cannot be placed starts nothing.\n"
               "Crashed models restart with backoff. Ctrl-C, SIGTERM or `gpufrac down` drains the\n"
               "router and stops everything the node started.");
  args.positional("SPEC", "The node spec (YAML); see docs/node.md for every field.")
      .flag("detach", "Return once the node is up and leave it running in the background "
                      "(its log goes to RUN_DIR/node.log).")
      .option("listen", "HOST:PORT", "Router address, overriding the spec's listen:.", std::nullopt)
      .option("name", "NAME", "Node name, overriding the spec's name: (down/status find it by name).",
              std::nullopt)
      .option("run-dir", "DIR", "Run directory (state, logs, MPS pipes), overriding the spec's run_dir:.",
              std::nullopt)
      .section("Example",
               "  cat > node.yaml <<'YAML'\n"
               "  name: demo\n"
               "  listen: 127.0.0.1:8000\n"
               "  mode: fractions\n"
               "  models:\n"
               "    - {name: a, model: qwen3-4b, fraction: {compute: 0.5, memory: 0.5}}\n"
               "    - {name: b, model: qwen3-4b, fraction: {compute: 0.5, memory: 0.5}}\n"
               "  YAML\n"
               "  gpufrac up node.yaml --detach      # two models at 50% SMs and half the memory each\n"
               "  curl localhost:8000/v1/completions -d '{\"model\":\"a\",\"prompt\":[1,2,3],\"max_tokens\":8}'\n"
               "  gpufrac status --name demo\n"
               "  gpufrac down --name demo\n\n"
               "  On a machine without an NVIDIA GPU the same spec runs on the CPU: `fractions` pins\n"
               "  each model to its share of the cores.");
  if (!args.parse(argc, argv)) return 0;
  if (args.positionals().size() != 1) throw UsageError("give one node spec file: gpufrac up SPEC");
  std::string spec_path = args.positionals()[0];
  NodeSpec spec = load_node_spec(spec_path);
  apply_overrides(args, spec);
  if (args.flag_set("detach")) return serve_detached(spec, spec_path);
  return serve(spec, spec_path, [&](Node& node) {
    std::cout << format_node_status(with_live_usage(node.state()))
              << "\nServing. Ctrl-C or `" << down_hint(spec) << "` stops the node.\n"
              << std::flush;
  });
}

}  // namespace gpufrac
