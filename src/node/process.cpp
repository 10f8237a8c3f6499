#include "node/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "common/clock.h"
#include "common/error.h"
#include "common/strings.h"

extern char** environ;

namespace gpufrac {
namespace {

struct ProcStat {
  char state = '?';
  pid_t ppid = 0;
  pid_t pgrp = 0;
  uint64_t start_time = 0;
};

// Fields of /proc/PID/stat after the command name (which may itself hold spaces and parens).
std::optional<ProcStat> read_proc_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  ProcStat stat;
  std::string skip;
  fields >> stat.state >> stat.ppid >> stat.pgrp;
  for (int field = 6; field < 22 && fields; ++field) fields >> skip;  // session .. itrealvalue
  fields >> stat.start_time;
  if (!fields) return std::nullopt;
  return stat;
}

std::vector<pid_t> all_pids() {
  std::vector<pid_t> pids;
  DIR* dir = opendir("/proc");
  if (!dir) return pids;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (pid > 0 && *end == '\0') pids.push_back(pid_t(pid));
  }
  closedir(dir);
  return pids;
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

[[noreturn]] void child_fail(int report_fd, const char* step) {
  int err = errno;
  char message[160];
  int n = std::snprintf(message, sizeof message, "%s: %s", step, std::strerror(err));
  ssize_t ignored = ::write(report_fd, message, size_t(n));
  (void)ignored;
  _exit(127);
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace

uint64_t process_start_time(pid_t pid) {
  auto stat = read_proc_stat(pid);
  return stat ? stat->start_time : 0;
}

ProcessId process_identity(pid_t pid) {
  auto stat = read_proc_stat(pid);
  if (!stat || stat->state == 'Z') return {};
  return {pid, stat->start_time};
}

bool process_alive(const ProcessId& id) {
  if (!id.valid()) return false;
  auto stat = read_proc_stat(id.pid);
  return stat && stat->state != 'Z' && (id.start_time == 0 || stat->start_time == id.start_time);
}

std::vector<pid_t> process_tree(pid_t root) {
  std::multimap<pid_t, pid_t> children;
  bool root_alive = false;
  for (pid_t pid : all_pids()) {
    auto stat = read_proc_stat(pid);
    if (!stat || stat->state == 'Z') continue;
    if (pid == root) root_alive = true;
    children.emplace(stat->ppid, pid);
  }
  std::vector<pid_t> tree;
  if (root_alive) tree.push_back(root);
  std::vector<pid_t> frontier = {root};
  while (!frontier.empty()) {
    pid_t parent = frontier.back();
    frontier.pop_back();
    auto [begin, end] = children.equal_range(parent);
    for (auto it = begin; it != end; ++it) {
      tree.push_back(it->second);
      frontier.push_back(it->second);
    }
  }
  return tree;
}

uint64_t process_tree_rss_bytes(pid_t root) {
  uint64_t total = 0;
  for (pid_t pid : process_tree(root)) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line)) {
      if (!starts_with(line, "VmRSS:")) continue;
      total += uint64_t(std::strtoull(line.c_str() + 6, nullptr, 10)) * 1024;  // kB
      break;
    }
  }
  return total;
}

std::string find_executable(const std::string& name) {
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  for (const std::string& dir : split(path ? path : "/usr/local/bin:/usr/bin:/bin", ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return {};
}

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  return env;
}

void set_env(std::vector<std::string>& env, const std::string& name,
             const std::optional<std::string>& value) {
  std::string prefix = name + "=";
  std::erase_if(env, [&](const std::string& entry) { return starts_with(entry, prefix); });
  if (value) env.push_back(prefix + *value);
}

void remove_env_prefix(std::vector<std::string>& env, const std::string& prefix) {
  std::erase_if(env, [&](const std::string& entry) { return starts_with(entry, prefix); });
}

ProcessId spawn_process(const SpawnOptions& options) {
  if (options.argv.empty()) throw RuntimeFailure("spawn_process: empty command line");
  std::string program = find_executable(options.argv[0]);
  if (program.empty()) {
    throw RuntimeFailure("cannot run '" + options.argv[0] +
                         "': not found or not executable (check the path or PATH)");
  }
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<char*> argv = c_strings(options.argv);
  std::vector<char*> envp = c_strings(options.env);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int cpu : options.cpus) CPU_SET(cpu, &cpus);
  bool to_log = !options.log_path.empty() && !options.inherit_output;
  int log_fd = ::open(to_log ? options.log_path.c_str() : "/dev/null",
                      O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    throw RuntimeFailure("cannot open log file " + options.log_path + ": " + std::strerror(errno));
  }
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    ::close(log_fd);
    ::close(null_fd);
    throw RuntimeFailure(std::string("pipe: ") + std::strerror(errno));
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(log_fd);
    ::close(null_fd);
    ::close(report[0]);
    ::close(report[1]);
    throw RuntimeFailure(std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    ::close(report[0]);
    if (::setpgid(0, 0) != 0) child_fail(report[1], "setpgid");
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    bool redirect = !options.inherit_output;
    if (::dup2(null_fd, 0) < 0 || (redirect && (::dup2(log_fd, 1) < 0 || ::dup2(log_fd, 2) < 0))) {
      child_fail(report[1], "dup2");
    }
    if (!options.cpus.empty() && ::sched_setaffinity(0, sizeof cpus, &cpus) != 0) {
      child_fail(report[1], "sched_setaffinity");
    }
    if (options.data_limit_bytes > 0) {
      rlimit limit{options.data_limit_bytes, options.data_limit_bytes};
      if (::setrlimit(RLIMIT_DATA, &limit) != 0) child_fail(report[1], "setrlimit(RLIMIT_DATA)");
    }
    ::execve(program.c_str(), argv.data(), envp.data());
    child_fail(report[1], "exec");
  }
  ::close(report[1]);
  ::close(log_fd);
  ::close(null_fd);
  char message[200];
  ssize_t n;
  do {
    n = ::read(report[0], message, sizeof message - 1);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n > 0) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    message[n] = '\0';
    throw RuntimeFailure("cannot start '" + options.argv[0] + "': " + message);
  }
  // The child has exec'd (the pipe closed on exec), so its start time is final.
  return {pid, process_start_time(pid)};
}

CommandOutput run_command(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                          const std::string& input, double timeout_s) {
  CommandOutput result;
  std::string program = argv.empty() ? "" : find_executable(argv[0]);
  if (program.empty()) {
    result.err = "'" + (argv.empty() ? std::string() : argv[0]) + "' not found or not executable";
    return result;
  }
  std::vector<char*> c_argv = c_strings(argv);
  std::vector<char*> c_env = c_strings(env);
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return result;
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    return result;
  }
  if (::pipe2(err, O_CLOEXEC) != 0) {
    for (int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
    return result;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execve(program.c_str(), c_argv.data(), c_env.data());
    _exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (pid < 0) {
    for (int fd : {in[1], out[0], err[0]}) ::close(fd);
    return result;
  }
  // Small inputs (a command line) fit the pipe buffer: write all, then close for EOF.
  ssize_t ignored = ::write(in[1], input.data(), input.size());
  (void)ignored;
  ::close(in[1]);
  int64_t deadline = monotonic_ns() + int64_t(timeout_s * 1e9);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  char buffer[4096];
  while (open_fds > 0) {
    int64_t left_ms = (deadline - monotonic_ns()) / 1'000'000;
    if (left_ms <= 0) {
      result.timed_out = true;
      break;
    }
    if (::poll(fds, 2, int(left_ms)) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        (i == 0 ? result.out : result.err).append(buffer, size_t(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (const pollfd& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  if (result.timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.wait_status = status;
  return result;
}

std::optional<int> reap_child(pid_t pid) {
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid) return status;
  if (r < 0 && errno == ECHILD) return 0;  // already reaped elsewhere: treat as exited
  return std::nullopt;
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "wait status " + std::to_string(status);
}

bool process_group_alive(const ProcessId& id) {
  if (!id.valid()) return false;
  if (process_alive(id)) return true;
  auto leader = read_proc_stat(id.pid);
  if (leader && id.start_time != 0 && leader->start_time != id.start_time) return false;
  for (pid_t pid : all_pids()) {
    auto stat = read_proc_stat(pid);
    if (stat && stat->state != 'Z' && stat->pgrp == id.pid) return true;
  }
  return false;
}

bool signal_process_group(const ProcessId& id, int sig) {
  if (!id.valid()) return false;
  auto leader = read_proc_stat(id.pid);
  // A pid is not reused while it names a live process group, so a different process under the
  // leader's pid means our whole group is gone.
  if (leader && id.start_time != 0 && leader->start_time != id.start_time) return false;
  if (!process_group_alive(id)) return false;
  return ::killpg(id.pid, sig) == 0 || ::kill(id.pid, sig) == 0;
}

bool stop_process_group(const ProcessId& id, double grace_s, bool reap) {
  auto gone = [&] {
    if (reap && id.valid()) reap_child(id.pid);
    return !process_group_alive(id);
  };
  if (gone()) return true;
  signal_process_group(id, SIGTERM);
  int64_t deadline = monotonic_ns() + int64_t(grace_s * 1e9);
  while (monotonic_ns() < deadline) {
    if (gone()) return true;
    sleep_ms(20);
  }
  signal_process_group(id, SIGKILL);
  deadline = monotonic_ns() + 5'000'000'000;
  while (monotonic_ns() < deadline) {
    if (gone()) return true;
    sleep_ms(20);
  }
  return gone();
}

}  // namespace gpufrac
