// Runs the memcap test programs as separate processes, the way the shim is meant to be used:
// with LD_PRELOAD set to the shim and LD_LIBRARY_PATH to the fake driver, in a fresh state
// directory and fake GPU per test (MemcapSandbox). Output is captured per line.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace memcap_test {

using Environment = std::map<std::string, std::optional<std::string>>;  // nullopt: unset it

struct ProgramResult {
  int exit_code = -1;  // -1: killed by a signal
  std::vector<std::string> lines;
  std::string stdout_text;
  std::string stderr_text;
};

// A program that runs until stopped; its stdout is read as it comes.
class RunningProgram {
 public:
  RunningProgram(const std::vector<std::string>& argv, const Environment& environment);
  ~RunningProgram();
  RunningProgram(const RunningProgram&) = delete;
  RunningProgram& operator=(const RunningProgram&) = delete;

  // Waits (up to timeout_s) for a line equal to `line`; false on EOF or timeout.
  bool wait_for_line(const std::string& line, double timeout_s = 30);
  void send_signal(int signal);
  ProgramResult wait(double timeout_s = 120);  // reads the rest, reaps the process
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  std::string stdout_text_;
  std::string stderr_text_;
  bool reaped_ = false;
};

ProgramResult run_program(const std::vector<std::string>& argv, const Environment& environment,
                          double timeout_s = 120);

// The stress load: memcap_probe's `stress` step in two processes at once, eight threads each (the
// second reaching the driver through cuGetProcAddress), with a delay inside every allocation that
// would expose any check-then-allocate race; under `first` and `second` (GPUFRAC_MEMCAP_* and
// the sandbox's fake GPU). Returns both results.
std::vector<ProgramResult> run_stress_pair(const std::vector<std::string>& probe_first,
                                           Environment first, Environment second);
// Each result's counts show work done, the limit (`limit`, for the message) reached, and no
// other error.
void expect_stress_reached(const std::vector<ProgramResult>& results, const std::string& limit);

// A private state dir, tenant and shared fake GPU for one test; removed afterwards.
class MemcapSandbox {
 public:
  MemcapSandbox();
  ~MemcapSandbox();

  // LD_PRELOAD=shim, LD_LIBRARY_PATH=fakes, the state dir, tenant "t", the shared fake GPU,
  // FAKE_CUDA_TOTAL_BYTES 1 GiB, and `caps` as GPUFRAC_MEMCAP_BYTES (nullopt: no cap).
  Environment environment(const std::optional<std::string>& caps) const;
  // memcap_probe ARGS... under environment(caps) merged with `extra`.
  ProgramResult probe(const std::vector<std::string>& args, const std::optional<std::string>& caps,
                      const Environment& extra = {}) const;
  std::vector<std::string> probe_argv(const std::vector<std::string>& args) const;

  const std::string& dir() const { return dir_; }
  std::string state_dir() const { return dir_ + "/state"; }
  // Peak and current usage of fake device `device` across every process of this sandbox.
  unsigned long long device_peak(int device) const;
  unsigned long long device_used(int device) const;

 private:
  std::string dir_;
};

}  // namespace memcap_test
