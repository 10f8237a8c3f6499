#include "k8s/agent_metrics.h"

#include <algorithm>

#include "k8s/pid_namespace.h"

namespace gpufrac::k8s {
namespace {

std::string escaped(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

std::string gpu_labels(const AgentGpu& gpu) {
  return "gpu=\"" + std::to_string(gpu.index) + "\",gpu_uuid=\"" + escaped(gpu.uuid) + "\"";
}

bool contains(const std::vector<pid_t>& pids, pid_t pid) {
  return std::find(pids.begin(), pids.end(), pid) != pids.end();
}

}  // namespace

std::string agent_metrics_text(const AgentSnapshot& snapshot, bool ready) {
  std::string out;
  header(out, "gpufrac_agent_ready", "gauge", "1 while every GPU's MPS control daemon answers.");
  out += "gpufrac_agent_ready " + std::to_string(ready ? 1 : 0) + "\n";
  struct Series {
    const char* name;
    const char* type;
    const char* help;
    size_t (*value)(const AgentGpu&);
  };
  const Series series[] = {
      {"gpufrac_agent_mps_daemon_up", "gauge",
       "1 when the GPU's MPS control daemon answered the last check.",
       [](const AgentGpu& g) { return size_t(g.answering ? 1 : 0); }},
      {"gpufrac_agent_mps_daemon_restarts_total", "counter",
       "Restarts of the GPU's MPS control daemon.",
       [](const AgentGpu& g) { return size_t(g.restarts); }},
      {"gpufrac_agent_mps_servers", "gauge", "MPS servers of the GPU's control daemon.",
       [](const AgentGpu& g) { return g.servers.size(); }},
      {"gpufrac_agent_mps_clients", "gauge", "MPS client processes on the GPU.",
       [](const AgentGpu& g) { return g.clients.size(); }},
  };
  for (const Series& s : series) {
    header(out, s.name, s.type, s.help);
    for (const AgentGpu& gpu : snapshot.gpus) {
      out +=
          std::string(s.name) + "{" + gpu_labels(gpu) + "} " + std::to_string(s.value(gpu)) + "\n";
    }
  }
  header(out, "gpufrac_agent_gpu_process_memory_bytes", "gauge",
         "GPU memory NVML reports for a process on the GPU.");
  for (const AgentGpu& gpu : snapshot.gpus) {
    for (const GpuProcess& p : gpu.memory) {
      pid_t pid = pid_t(p.pid);
      const char* role = contains(gpu.clients, pid)   ? "mps_client"
                         : contains(gpu.servers, pid) ? "mps_server"
                                                      : "other";
      out += "gpufrac_agent_gpu_process_memory_bytes{" + gpu_labels(gpu) + ",pid=\"" +
             std::to_string(pid) + "\",role=\"" + role + "\",pod_uid=\"" +
             escaped(pod_uid_of(pid)) + "\"} " + std::to_string(p.used_bytes) + "\n";
    }
  }
  return out;
}

}  // namespace gpufrac::k8s
