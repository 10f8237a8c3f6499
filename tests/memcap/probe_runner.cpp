#include "probe_runner.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>

#include "common/clock.h"
#include "fakes/fake_libcuda.h"

extern char** environ;

namespace memcap_test {
namespace {

std::vector<std::string> merged_environment(const Environment& changes) {
  std::vector<std::string> result;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string text = *entry;
    std::string name = text.substr(0, text.find('='));
    if (changes.count(name) == 0) result.push_back(text);
  }
  for (const auto& [name, value] : changes) {
    if (value) result.push_back(name + "=" + *value);
  }
  return result;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> result;
  for (std::string& s : strings) result.push_back(s.data());
  result.push_back(nullptr);
  return result;
}

// Reads what is available from the fds (poll up to timeout_ms); false once both are at EOF.
bool pump(int* stdout_fd, int* stderr_fd, std::string* out, std::string* err, int timeout_ms) {
  pollfd fds[2] = {{*stdout_fd, POLLIN, 0}, {*stderr_fd, POLLIN, 0}};
  if (poll(fds, 2, timeout_ms) <= 0) return *stdout_fd >= 0 || *stderr_fd >= 0;
  int* fd_of[2] = {stdout_fd, stderr_fd};
  std::string* text_of[2] = {out, err};
  for (int i = 0; i < 2; ++i) {
    if (*fd_of[i] < 0 || fds[i].revents == 0) continue;
    char buffer[4096];
    ssize_t n = read(*fd_of[i], buffer, sizeof buffer);
    if (n > 0) {
      text_of[i]->append(buffer, size_t(n));
    } else {
      close(*fd_of[i]);
      *fd_of[i] = -1;
    }
  }
  return *stdout_fd >= 0 || *stderr_fd >= 0;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

FakeDeviceUsage* map_usage(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT, 0600);
  if (fd < 0 || ftruncate(fd, sizeof(FakeDeviceUsage)) != 0) throw std::runtime_error("usage file");
  void* mapping = mmap(nullptr, sizeof(FakeDeviceUsage), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mapping == MAP_FAILED) throw std::runtime_error("usage mmap");
  return static_cast<FakeDeviceUsage*>(mapping);
}

}  // namespace

RunningProgram::RunningProgram(const std::vector<std::string>& argv,
                               const Environment& environment) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  std::vector<std::string> args = argv;
  std::vector<std::string> env = merged_environment(environment);
  std::vector<char*> arg_pointers = pointers(args);
  std::vector<char*> env_pointers = pointers(env);
  int failed = posix_spawn(&pid_, arg_pointers[0], &actions, nullptr, arg_pointers.data(),
                           env_pointers.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  close(err[1]);
  stdout_fd_ = out[0];
  stderr_fd_ = err[0];
  if (failed != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + strerror(failed));
}

RunningProgram::~RunningProgram() {
  if (!reaped_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
  if (stderr_fd_ >= 0) close(stderr_fd_);
}

bool RunningProgram::wait_for_line(const std::string& line, double timeout_s) {
  int64_t deadline = gpufrac::monotonic_ns() + int64_t(timeout_s * 1e9);
  while (gpufrac::monotonic_ns() < deadline) {
    for (const std::string& seen : split_lines(stdout_text_)) {
      if (seen == line) return true;
    }
    if (!pump(&stdout_fd_, &stderr_fd_, &stdout_text_, &stderr_text_, 100)) break;
  }
  for (const std::string& seen : split_lines(stdout_text_)) {
    if (seen == line) return true;
  }
  return false;
}

void RunningProgram::send_signal(int signal) {
  kill(pid_, signal);
}

ProgramResult RunningProgram::wait(double timeout_s) {
  int64_t deadline = gpufrac::monotonic_ns() + int64_t(timeout_s * 1e9);
  while (pump(&stdout_fd_, &stderr_fd_, &stdout_text_, &stderr_text_, 100)) {
    if (gpufrac::monotonic_ns() > deadline) {
      kill(pid_, SIGKILL);
      stderr_text_ += "[killed: timeout]";
      break;
    }
  }
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
  ProgramResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.stdout_text = stdout_text_;
  result.stderr_text = stderr_text_;
  result.lines = split_lines(stdout_text_);
  return result;
}

ProgramResult run_program(const std::vector<std::string>& argv, const Environment& environment,
                          double timeout_s) {
  RunningProgram program(argv, environment);
  return program.wait(timeout_s);
}

std::vector<ProgramResult> run_stress_pair(const std::vector<std::string>& probe_first,
                                           Environment first, Environment second) {
  first["FAKE_CUDA_ALLOC_DELAY_US"] = "100";
  second["FAKE_CUDA_ALLOC_DELAY_US"] = "100";
  std::vector<std::string> argv_first = probe_first;
  std::vector<std::string> argv_second = probe_first;
  for (const char* arg : {"init", "stress", "8", "400", "48", "1"}) argv_first.push_back(arg);
  for (const char* arg : {"--api", "procaddress", "init", "stress", "8", "400", "48", "2"}) {
    argv_second.push_back(arg);
  }
  RunningProgram one(argv_first, first);
  RunningProgram two(argv_second, second);
  return {one.wait(), two.wait()};
}

void expect_stress_reached(const std::vector<ProgramResult>& results, const std::string& limit) {
  for (const ProgramResult& r : results) {
    ASSERT_EQ(r.lines.size(), 2u) << r.stdout_text << r.stderr_text;
    unsigned long long ok = 0, oom = 0, other = 0;
    ASSERT_EQ(sscanf(r.lines[1].c_str(), "stress ok=%llu oom=%llu other=%llu", &ok, &oom, &other),
              3);
    EXPECT_GT(ok, 100u);
    EXPECT_GT(oom, 0u) << "the " << limit << " was never reached: the test proves nothing";
    EXPECT_EQ(other, 0u) << r.stderr_text;
  }
}

MemcapSandbox::MemcapSandbox() {
  char pattern[] = "/tmp/memcap-test-XXXXXX";
  if (mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp");
  dir_ = pattern;
}

MemcapSandbox::~MemcapSandbox() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

Environment MemcapSandbox::environment(const std::optional<std::string>& caps) const {
  return {
      {"LD_PRELOAD", MEMCAP_SHIM},
      {"LD_LIBRARY_PATH", MEMCAP_FAKE_CUDA_DIR},
      {"GPUFRAC_MEMCAP_BYTES", caps},
      {"GPUFRAC_MEMCAP_TENANT", "t"},
      {"GPUFRAC_MEMCAP_STATE_DIR", state_dir()},
      {"GPUFRAC_MEMCAP_VERBOSE", std::nullopt},
      {"GPUFRAC_MEMCAP_FLOOR_BYTES", std::nullopt},
      {"GPUFRAC_MEMCAP_POOL_BYTES", std::nullopt},
      {"GPUFRAC_MEMCAP_POOL", std::nullopt},
      {"FAKE_CUDA_SHARED_FILE", dir_ + "/gpu"},
      {"FAKE_CUDA_TOTAL_BYTES", std::to_string(1ull << 30)},
      {"FAKE_CUDA_OTHERS_BYTES", std::nullopt},
      {"FAKE_CUDA_ALLOC_DELAY_US", std::nullopt},
      {"FAKE_CUDA_PROC_TABLE", std::nullopt},
      {"FAKE_CUDA_NEWER_MEMALLOC", std::nullopt},
  };
}

std::vector<std::string> MemcapSandbox::probe_argv(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {MEMCAP_PROBE};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

ProgramResult MemcapSandbox::probe(const std::vector<std::string>& args,
                                   const std::optional<std::string>& caps,
                                   const Environment& extra) const {
  Environment env = environment(caps);
  for (const auto& [name, value] : extra) env[name] = value;
  return run_program(probe_argv(args), env);
}

unsigned long long MemcapSandbox::device_peak(int device) const {
  FakeDeviceUsage* usage = map_usage(dir_ + "/gpu");
  unsigned long long peak = usage->peak[device].load();
  munmap(usage, sizeof *usage);
  return peak;
}

unsigned long long MemcapSandbox::device_used(int device) const {
  FakeDeviceUsage* usage = map_usage(dir_ + "/gpu");
  unsigned long long used = usage->used[device].load();
  munmap(usage, sizeof *usage);
  return used;
}

}  // namespace memcap_test
