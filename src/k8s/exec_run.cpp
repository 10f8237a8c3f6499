#include "k8s/exec_run.h"

#include <signal.h>
#include <sys/wait.h>

#include <iostream>
#include <thread>

#include "common/clock.h"
#include "common/error.h"
#include "common/http_client.h"
#include "k8s/agent_layout.h"
#include "k8s/agent_socket.h"
#include "node/process.h"

namespace gpufrac::k8s {
namespace {

// A client registers with MPS when it initialises CUDA, before its engine reports healthy; the
// control daemon may list it a moment later (as in the node's check).
constexpr double kAttachGrace_s = 5;

void say(const std::string& line) {
  std::cerr << "gpufrac k8s exec: " << line << "\n" << std::flush;
}

class Signals {
 public:
  Signals() {
    sigemptyset(&set_);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set_, sig);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  }
  // The signal that arrived within `ms`, or 0.
  int wait(int ms) {
    timespec tick{ms / 1000, long(ms % 1000) * 1'000'000};
    siginfo_t info;
    int sig = sigtimedwait(&set_, &info, &tick);
    return sig > 0 ? sig : 0;
  }

 private:
  sigset_t set_;
};

int exit_code_of(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Reaps every child that has exited (orphans reparented to us when we are PID 1); returns the
// engine's wait status once it is among them.
std::optional<int> reap_children(pid_t engine) {
  std::optional<int> engine_status;
  int status = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
    if (pid == engine) engine_status = status;
  }
  return engine_status;
}

void wait_for_agent(const ExecRun& run, Signals& signals) {
  std::string socket = agent_socket_path(run.options.agent_root);
  int64_t deadline = monotonic_ns() + int64_t(run.agent_timeout_s * 1e9);
  std::string why;
  bool told = false;
  while (true) {
    try {
      Json answer = ask_agent(socket, {{"op", "ready"}, {"gpu", run.plan.gpu_uuid}}, 5);
      if (answer.value("ok", false)) return;
      why = answer.value("error", "not ready");
    } catch (const RuntimeFailure& e) {
      why = e.what();
    }
    if (monotonic_ns() > deadline) break;
    if (!told) say("waiting for the node agent's MPS daemon of " + run.plan.gpu_uuid + ": " + why);
    told = true;
    if (int sig = signals.wait(1000))
      throw RuntimeFailure(std::string(strsignal(sig)) + " while waiting for the node agent");
  }
  throw RuntimeFailure(
      "no MPS daemon of " + run.plan.gpu_uuid + " answers (" + why + "); the engine was not " +
      "started, since it would run without its SM and memory limits: is the gpufrac-agent " +
      "DaemonSet ready on this node, with the same --root (" + run.options.agent_root + ")?");
}

// "" once the engine is an MPS client of its GPU's daemon, else why not.
std::string verify_client(const ExecRun& run, const ProcessId& engine) {
  std::string socket = agent_socket_path(run.options.agent_root);
  int64_t deadline = monotonic_ns() + int64_t(kAttachGrace_s * 1e9);
  std::string why;
  while (true) {
    try {
      Json answer = ask_agent(
          socket, {{"op", "client"}, {"gpu", run.plan.gpu_uuid}, {"pid", engine.pid}}, 10);
      if (answer.value("ok", false)) {
        say("the engine (pid " + std::to_string(engine.pid) + ", host pid " +
            std::to_string(answer.value("host_pid", 0)) + ") is an MPS client of " +
            run.plan.gpu_uuid + "'s daemon: SM " + std::to_string(run.plan.sm_percent) +
            "%, memory cap " + std::to_string(run.plan.memory_cap_bytes >> 20) + " MiB");
        return "";
      }
      why = answer.value("error", "not a client");
    } catch (const RuntimeFailure& e) {
      why = e.what();
    }
    if (monotonic_ns() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return "the engine (pid " + std::to_string(engine.pid) + ") is not an MPS client of " +
         run.plan.gpu_uuid + "'s daemon (pipe " +
         mps_pipe_dir(run.options.agent_root, run.plan.gpu_uuid) + "; " + why +
         "): it would run on the whole GPU without its SM and memory limits, so it was stopped; "
         "make sure its " +
         "command keeps CUDA_MPS_PIPE_DIRECTORY";
}

}  // namespace

int run_exec(const ExecRun& run) {
  Signals signals;  // before anything else: signals wait for the loop below
  bool fractions = run.options.mode == SharingMode::kFractions;
  if (fractions) wait_for_agent(run, signals);

  SpawnOptions spawn;
  spawn.argv = run.plan.argv;
  spawn.env = run.plan.env;
  spawn.inherit_output = true;
  ProcessId engine = spawn_process(spawn);
  say("started the engine (pid " + std::to_string(engine.pid) + ") on " +
      (run.plan.gpu_uuid.empty() ? std::string("its GPU") : run.plan.gpu_uuid) + " in " +
      std::string(sharing_mode_name(run.options.mode)) + " mode");

  bool healthy = false;
  int64_t startup_deadline = monotonic_ns() + int64_t(run.startup_timeout_s * 1e9);
  while (true) {
    if (std::optional<int> status = reap_children(engine.pid)) {
      if (!healthy) say("the engine exited during startup (" + describe_wait_status(*status) + ")");
      return exit_code_of(*status);
    }
    if (int sig = signals.wait(healthy ? 500 : 100)) {
      say(std::string(strsignal(sig)) + ": stopping the engine");
      stop_process_group(engine, run.stop_timeout_s, true);
      reap_children(engine.pid);
      return 0;
    }
    if (healthy) continue;
    if (http_get(run.health_url, 2).status == 200) {
      healthy = true;
      std::string problem = fractions ? verify_client(run, engine) : "";
      if (!problem.empty()) {
        say(problem);
        stop_process_group(engine, run.stop_timeout_s, true);
        reap_children(engine.pid);
        return 1;
      }
    } else if (monotonic_ns() > startup_deadline) {
      say("the engine did not answer 200 on " + run.health_url + " within " +
          std::to_string(int(run.startup_timeout_s)) + " s; stopping it");
      stop_process_group(engine, run.stop_timeout_s, true);
      reap_children(engine.pid);
      return 1;
    }
  }
}

}  // namespace gpufrac::k8s
