// Where the node agent (`gpufrac k8s agent`) keeps what model pods share with it, under one host
// directory (default /run/gpufrac) that the agent's DaemonSet and every model pod mount at the
// same path:
//
//   ROOT/mps/<GPU UUID>/pipe   the MPS control daemon of that GPU: CUDA_MPS_PIPE_DIRECTORY
//   ROOT/mps/<GPU UUID>/log    its CUDA_MPS_LOG_DIRECTORY
//   ROOT/shm                   mounted as /dev/shm by the agent and the pods: MPS clients and
//                              their server talk through shared memory as well as the pipes
//   ROOT/agent.sock            the agent's question socket (agent_socket.h)
//   ROOT/agent.lock            held by the running agent: a second agent on the node refuses
//
// The ports and the user id the rendered manifests and the agent agree on are here too.
#pragma once

#include <string>

namespace gpufrac::k8s {

inline constexpr const char* kDefaultAgentRoot = "/run/gpufrac";
inline constexpr int kAgentPort = 9402;   // the agent's /ready, /healthz and /metrics
inline constexpr int kEnginePort = 8000;  // every model container's engine
inline constexpr int kPodUid = 1000;      // every model pod's runAsUser (one MPS server per UID)

inline std::string mps_gpu_dir(const std::string& root, const std::string& uuid) {
  return root + "/mps/" + uuid;
}
inline std::string mps_pipe_dir(const std::string& root, const std::string& uuid) {
  return mps_gpu_dir(root, uuid) + "/pipe";
}
inline std::string mps_log_dir(const std::string& root, const std::string& uuid) {
  return mps_gpu_dir(root, uuid) + "/log";
}
inline std::string agent_shm_dir(const std::string& root) {
  return root + "/shm";
}
inline std::string agent_socket_path(const std::string& root) {
  return root + "/agent.sock";
}
inline std::string agent_lock_path(const std::string& root) {
  return root + "/agent.lock";
}

}  // namespace gpufrac::k8s
