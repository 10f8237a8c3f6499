#include "k8s/pid_namespace.h"

#include <cctype>
#include <fstream>
#include <sstream>

#include "node/process.h"

namespace gpufrac::k8s {

std::vector<pid_t> namespace_pids(pid_t host_pid) {
  std::ifstream in("/proc/" + std::to_string(host_pid) + "/status");
  std::vector<pid_t> pids;
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("NSpid:")) continue;
    std::istringstream fields(line.substr(6));
    for (pid_t pid; fields >> pid;) pids.push_back(pid);
    break;
  }
  return pids;
}

std::optional<pid_t> find_in_tree_by_namespace_pid(pid_t root, pid_t pid_in_namespace) {
  for (pid_t pid : process_tree(root)) {
    std::vector<pid_t> pids = namespace_pids(pid);
    if (!pids.empty() && pids.back() == pid_in_namespace) return pid;
  }
  return std::nullopt;
}

std::string pod_uid_from_cgroup(const std::string& cgroup_text) {
  // ".../kubepods-burstable-pod1234abcd_5678_....slice/..." or
  // ".../kubepods/besteffort/pod1234abcd-5678-.../..."
  size_t at = 0;
  while ((at = cgroup_text.find("pod", at)) != std::string::npos) {
    at += 3;
    size_t end = at;
    while (end < cgroup_text.size() &&
           (std::isxdigit(static_cast<unsigned char>(cgroup_text[end])) ||
            cgroup_text[end] == '-' || cgroup_text[end] == '_')) {
      ++end;
    }
    std::string uid = cgroup_text.substr(at, end - at);
    if (uid.size() == 36) {  // 8-4-4-4-12
      for (char& c : uid) {
        if (c == '_') c = '-';
      }
      return uid;
    }
  }
  return "";
}

std::string pod_uid_of(pid_t host_pid) {
  std::ifstream in("/proc/" + std::to_string(host_pid) + "/cgroup");
  std::stringstream text;
  text << in.rdbuf();
  return pod_uid_from_cgroup(text.str());
}

}  // namespace gpufrac::k8s
