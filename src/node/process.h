// Child processes the node starts and later finds again. A process is named by its pid AND its
// start time (field 22 of /proc/PID/stat, clock ticks since boot), so a recycled pid is never
// mistaken for ours: `gpufrac down` from another process signals only what the node started.
//
// spawn_process() forks and execs with an explicit environment, in a new process group (so a
// stop reaches an engine's own workers too), with stdout+stderr appended to a log file, an
// optional CPU affinity (sched_setaffinity) and an optional RLIMIT_DATA. An exec failure is
// reported to the caller as a RuntimeFailure (through a close-on-exec pipe), not as a silent
// child exit. All functions are thread-safe; none reaps a child it was not asked about.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpufrac {

struct ProcessId {
  pid_t pid = 0;
  uint64_t start_time = 0;  // /proc/PID/stat starttime; 0 = unknown
  bool valid() const { return pid > 0; }
  bool operator==(const ProcessId&) const = default;
};

// The process's start time, or 0 when it does not exist.
uint64_t process_start_time(pid_t pid);
// The identity of a running process (start time read now); pid 0 when it does not exist.
ProcessId process_identity(pid_t pid);
// True while `id` names a live (non-zombie) process that started at id.start_time.
bool process_alive(const ProcessId& id);
// Every live process whose parent chain leads to `root` (root included when alive).
std::vector<pid_t> process_tree(pid_t root);
// Resident memory of a process tree in bytes (VmRSS summed), 0 when gone.
uint64_t process_tree_rss_bytes(pid_t root);

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is looked up on PATH when it has no '/'
  std::vector<std::string> env;   // the whole environment, "NAME=value"
  std::string log_path;           // stdout and stderr are appended here; empty: /dev/null
  bool inherit_output = false;    // keep this process's stdout and stderr instead (log_path unused)
  std::vector<int> cpus;          // CPU affinity; empty: inherit
  uint64_t data_limit_bytes = 0;  // RLIMIT_DATA; 0: inherit
};

// Starts the process; throws RuntimeFailure naming argv[0] when it cannot be executed.
ProcessId spawn_process(const SpawnOptions& options);

struct CommandOutput {
  int wait_status = -1;  // as from waitpid; -1 when it could not run
  bool timed_out = false;
  std::string out;
  std::string err;
  bool ok() const { return !timed_out && wait_status == 0; }
};
// Runs a short command to completion: `input` on its stdin, stdout and stderr captured, killed
// after `timeout_s`. For control programs (nvidia-cuda-mps-control), not for engines.
CommandOutput run_command(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                          const std::string& input, double timeout_s);

// Non-blocking reap of our own child: the wait status once it has exited, else nullopt.
std::optional<int> reap_child(pid_t pid);
// "exit code 3", "killed by signal 9 (Killed)".
std::string describe_wait_status(int status);

// Sends `sig` to the process group that `id` leads, but only while `id` is still that process
// (or, once the leader is gone, to the group's survivors: a pgid is never reused while any member
// lives). Returns false when nothing was signalled.
bool signal_process_group(const ProcessId& id, int sig);
// True while the leader or any member of its process group is alive.
bool process_group_alive(const ProcessId& id);

// SIGTERM to the group, up to `grace_s` for it to go, then SIGKILL and up to 5 s more. For our
// own children, `reap` reaps the leader as it exits. Returns true when everything is gone.
bool stop_process_group(const ProcessId& id, double grace_s, bool reap);

// Looks `name` up on PATH (or returns it when it contains '/'); empty when not found.
std::string find_executable(const std::string& name);
// The environment of this process as "NAME=value" strings.
std::vector<std::string> current_environment();
// Sets (replacing) or, with an empty optional, removes NAME in an environment list.
void set_env(std::vector<std::string>& env, const std::string& name,
             const std::optional<std::string>& value);
// Removes every variable whose name starts with `prefix`.
void remove_env_prefix(std::vector<std::string>& env, const std::string& prefix);

}  // namespace gpufrac
