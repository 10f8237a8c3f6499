// The node agent's /metrics, in Prometheus' text format (version 0.0.4), from its last check:
//
//   gpufrac_agent_ready                          1 while every GPU's MPS daemon answers
//   gpufrac_agent_mps_daemon_up{gpu,gpu_uuid}    1 when that GPU's daemon answered
//   gpufrac_agent_mps_daemon_restarts_total{...} restarts of that daemon since the agent started
//   gpufrac_agent_mps_servers{...}               MPS servers of that daemon
//   gpufrac_agent_mps_clients{...}               MPS client processes of those servers
//   gpufrac_agent_gpu_process_memory_bytes{gpu,gpu_uuid,pid,role,pod_uid}
//       GPU memory NVML reports per process on that GPU; role is mps_client, mps_server or
//       other; pod_uid the Kubernetes pod it belongs to ("" for none). Drivers that account MPS
//       clients' memory to their server show it on the server's line.
// Pure; thread-safe.
#pragma once

#include <string>

#include "k8s/node_agent.h"

namespace gpufrac::k8s {

std::string agent_metrics_text(const AgentSnapshot& snapshot, bool ready);

}  // namespace gpufrac::k8s
