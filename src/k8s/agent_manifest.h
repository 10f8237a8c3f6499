// The node agent's DaemonSet (`gpufrac k8s agent` on every GPU node): hostPID (it matches pod
// processes to MPS clients by host pid), privileged with every GPU of the node
// (NVIDIA_VISIBLE_DEVICES=all through the nvidia runtime class), the agent root and its shm
// directory mounted from the host, readiness on /ready (every GPU's MPS daemon answers), liveness
// on /healthz, Prometheus scrape annotations for /metrics. Updates only on delete (OnDelete):
// replacing the agent restarts the MPS daemons, which ends every client on the node.
// One agent per cluster: every rendered base carries the same object. Pure; thread-safe.
#pragma once

#include "k8s/manifests.h"

namespace gpufrac::k8s {

inline constexpr const char* kAgentName = "gpufrac-agent";

Object agent_daemonset(const RenderOptions& options);

}  // namespace gpufrac::k8s
