// The node agent's question socket (ROOT/agent.sock, agent_layout.h): how `gpufrac k8s exec` in a
// pod, which may lack the MPS control program and whose process ids are not the host's, asks the
// agent (hostPID) about its GPU's MPS daemon. One JSON object per line each way, one question per
// connection:
//
//   {"op": "ready", "gpu": "GPU-..."}            -> {"ok": true} when that GPU's daemon answers
//   {"op": "client", "gpu": "GPU-...", "pid": N} -> {"ok": true, "host_pid": H} when process N
//        as the asker sees it (its PID namespace) is, or has a descendant that is, a client of
//        that GPU's MPS server; else {"ok": false, "error": "why"}
//
// The agent learns who asks from the socket (SO_PEERCRED: the kernel gives the asker's pid in the
// agent's namespace) and looks for N only among the asker's descendants, by the last entry of
// their NSpid (pid_namespace.h): a pod can ask about its own processes only.
// Thread-safe: the server answers on its own thread; ask_agent may be called from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "common/json.h"

namespace gpufrac::k8s {

// Sends `request`, returns the reply. Throws RuntimeFailure when nobody answers within timeout_s.
Json ask_agent(const std::string& socket_path, const Json& request, double timeout_s = 10);

class AgentSocket {
 public:
  // The handler gets the request and the asker's pid in this process's PID namespace; it runs on
  // the socket's thread, one question at a time.
  using Handler = std::function<Json(const Json& request, pid_t asker)>;
  // Binds `path` (replacing a stale socket file), mode 0666: pods of any user may ask.
  AgentSocket(std::string path, Handler handler);
  ~AgentSocket();  // stops the thread and removes the socket file
  AgentSocket(const AgentSocket&) = delete;
  AgentSocket& operator=(const AgentSocket&) = delete;

 private:
  void serve();
  std::string path_;
  Handler handler_;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace gpufrac::k8s
