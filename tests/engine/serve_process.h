// `gpufrac serve` as a child process for the process-level tests ($GPUFRAC_BIN serve ARGS...),
// its output in a log file (free_port, raw_http_exchange.h, gives it a port). The destructor kills the
// process (SIGKILL) if terminate() did not end it. Not thread-safe; one object per process.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "server_test_client.h"

namespace gpufrac::testing {

class ServeProcess {
 public:
  explicit ServeProcess(std::vector<std::string> args) {
    const char* bin = std::getenv("GPUFRAC_BIN");
    if (!bin) throw std::runtime_error("GPUFRAC_BIN is not set");
    args.insert(args.begin(), {bin, "serve"});
    log_path_ = "/tmp/gpufrac-serve-test-" + std::to_string(::getpid()) + ".log";
    pid_ = ::fork();
    if (pid_ == 0) {
      int log = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(log, 1);
      ::dup2(log, 2);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(bin, argv.data());
      ::_exit(127);
    }
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool wait_healthy(int port, std::chrono::seconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      if (http_get("http://127.0.0.1:" + std::to_string(port) + "/health", 1).status == 200) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  // SIGTERM, then the exit status (or -1 if it did not exit within 30 s).
  int terminate() {
    ::kill(pid_, SIGTERM);
    return wait_exit();
  }
  // The exit status once the process ends by itself (or -1 if it did not within 30 s).
  int wait_exit() {
    for (int i = 0; i < 300; ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return -1;
  }
  std::string log() const {
    std::string text;
    if (FILE* f = std::fopen(log_path_.c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
      std::fclose(f);
    }
    return text;
  }

 private:
  pid_t pid_ = -1;
  std::string log_path_;
};

}  // namespace gpufrac::testing
