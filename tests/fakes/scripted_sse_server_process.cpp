#include "fakes/scripted_sse_server_process.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>

extern char** environ;

namespace gpufrac {

ScriptedSseServerProcess::ScriptedSseServerProcess(const std::string& executable,
                                                   std::vector<std::string> arguments) {
  int out[2];
  if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  arguments.insert(arguments.begin(), executable);
  arguments.insert(arguments.end(), {"--port", "0"});
  std::vector<char*> argv;
  for (std::string& a : arguments) argv.push_back(a.data());
  argv.push_back(nullptr);
  int rc = ::posix_spawn(&pid_, executable.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    throw std::runtime_error("cannot start " + executable);
  }
  output_fd_ = out[0];
  std::string text;  // the first line, read unbuffered so nothing after it is swallowed
  char c;
  while (text.size() < 256 && ::read(output_fd_, &c, 1) == 1 && c != '\n') text += c;
  size_t at = text.find("http://");
  if (at == std::string::npos) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    ::close(output_fd_);
    throw std::runtime_error(executable + " did not report its address: '" + text + "'");
  }
  url_ = text.substr(at);
  port_ = std::stoi(url_.substr(url_.rfind(':') + 1));
}

ScriptedSseServerProcess::~ScriptedSseServerProcess() { stop(); }

void ScriptedSseServerProcess::stop() {
  if (pid_ < 0) return;
  ::kill(pid_, SIGTERM);
  ::waitpid(pid_, nullptr, 0);
  ::close(output_fd_);
  pid_ = -1;
}

}  // namespace gpufrac
