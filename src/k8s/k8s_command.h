// `gpufrac k8s SUBCOMMAND`: gpufrac on a Kubernetes cluster scheduled by KAI-Scheduler
// (docs/kubernetes.md). render writes the manifests; exec, agent and router are what the rendered
// pods run. Errors print as "gpufrac k8s SUBCOMMAND: <line>", one per line of the message (exec
// reports every bad variable at once), exit 2 for usage errors and 1 for failures.
#pragma once

namespace gpufrac::k8s {

int k8s_command(int argc, char** argv);

}  // namespace gpufrac::k8s
