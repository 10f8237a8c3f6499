// The scripted SSE server as a child process (the scripted_sse_server executable), for tests
// that time bench: a real server is another process, and sharing one with the client (its file
// table, allocator and locks) would slow the fake down under a burst of a thousand requests.
// Starts in the constructor (waits for "listening on URL"); stop() (or the destructor) sends
// SIGTERM and reaps it, after which its --trace file is complete.
// Throws std::runtime_error when the executable cannot start. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace gpufrac {

class ScriptedSseServerProcess {
 public:
  // `arguments` are scripted_sse_server's options, e.g. {"--ttft-ms", "40"}.
  ScriptedSseServerProcess(const std::string& executable, std::vector<std::string> arguments);
  ~ScriptedSseServerProcess();
  void stop();  // idempotent
  ScriptedSseServerProcess(const ScriptedSseServerProcess&) = delete;
  ScriptedSseServerProcess& operator=(const ScriptedSseServerProcess&) = delete;

  const std::string& url() const { return url_; }  // "http://127.0.0.1:PORT"
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int output_fd_ = -1;  // the child's stdout, kept open so its last line has somewhere to go
  std::string url_;
  int port_ = 0;
};

}  // namespace gpufrac
