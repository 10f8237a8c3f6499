// `gpufrac k8s agent`: the node agent the gpufrac-agent DaemonSet runs (node_agent.h), with
//   http://LISTEN/ready    200 while every GPU's MPS daemon answers, else 503 naming the GPUs
//   http://LISTEN/healthz  200 while the agent's checks run
//   http://LISTEN/metrics  Prometheus metrics (agent_metrics.h)
//   ROOT/agent.sock        the question socket of `gpufrac k8s exec` (agent_socket.h)
// SIGTERM, SIGINT or SIGHUP stop every daemon it started and exit 0.
#pragma once

namespace gpufrac::k8s {

int agent_command(int argc, char** argv);

}  // namespace gpufrac::k8s
