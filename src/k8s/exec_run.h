// `gpufrac k8s exec` once planned (exec_plan.h): runs the engine as the container's main process
// would, and fails closed.
//
//   1. fractions: waits (up to agent_timeout_s) until the node agent says the GPU's MPS daemon
//      answers; the engine never starts before there is a daemon to attach to.
//   2. starts the engine (own process group, this process's stdout/stderr) and waits until its
//      health URL answers 200 (up to startup_timeout_s).
//   3. fractions: asks the agent whether the engine (or a process it started) is an MPS client of
//      that GPU's daemon, for up to 5 s; if not, stops the engine and returns 1 with the reason:
//      the pod never serves on the whole GPU without its limits.
//   4. then waits for the engine: returns its exit code (128 + signal when killed). SIGTERM,
//      SIGINT or SIGHUP stop it (SIGTERM to its group, SIGKILL after stop_timeout_s) and return 0.
// As a container's PID 1 it also reaps orphaned descendants. Failures before the engine runs
// throw RuntimeFailure; a failed check or startup is a line on stderr and exit code 1.
// One thread; call from main.
#pragma once

#include <string>

#include "k8s/exec_plan.h"

namespace gpufrac::k8s {

struct ExecRun {
  ExecPlan plan;
  ExecOptions options;
  std::string health_url;
  double startup_timeout_s = 600;
  double stop_timeout_s = 10;
  double agent_timeout_s = 120;
};

int run_exec(const ExecRun& run);

}  // namespace gpufrac::k8s
