// Processes seen across PID namespaces, from /proc (the agent runs with hostPID, so it sees every
// pod's processes under their host pids). A process's NSpid line in /proc/PID/status lists its
// pid in each namespace from the host's down to its own; the last entry is the pid its pod sees.
// Pod identity comes from /proc/PID/cgroup, whose path holds "pod<UID>" under the kubelet's
// cgroup layouts (cgroupfs "pod<uid>", systemd "pod<uid_with_underscores>.slice").
// Read-only; thread-safe.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace gpufrac::k8s {

// The NSpid entries of a process (host first); empty when it is gone or the kernel has no NSpid.
std::vector<pid_t> namespace_pids(pid_t host_pid);

// The process among `root` and its descendants whose own-namespace pid is `pid_in_namespace`.
std::optional<pid_t> find_in_tree_by_namespace_pid(pid_t root, pid_t pid_in_namespace);

// The Kubernetes pod UID of a process ("" when its cgroup names none).
std::string pod_uid_of(pid_t host_pid);
// Parsed from /proc/PID/cgroup text (exposed for tests).
std::string pod_uid_from_cgroup(const std::string& cgroup_text);

}  // namespace gpufrac::k8s
