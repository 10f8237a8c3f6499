// `gpufrac k8s exec [--dry-run] -- COMMAND...`: the entrypoint of every rendered model container.
// Reads the pod's GPU environment (pod_gpu_env.h), plans the engine's limits (exec_plan.h) and
// runs it fail-closed (exec_run.h). --dry-run prints the variables it would set, one NAME=value
// line each, then "command: " and the engine's command line, and exits 0.
#pragma once

namespace gpufrac::k8s {

int exec_command(int argc, char** argv);

}  // namespace gpufrac::k8s
