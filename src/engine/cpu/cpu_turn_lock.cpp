#include "engine/cpu/cpu_turn_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace gpufrac::engine {

CpuTurnLock::CpuTurnLock(const std::string& path) : path_(path) {
  if (path.empty()) return;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw UsageError("--cpu-turn-lock: cannot open " + path + ": " + std::strerror(errno) +
                     " (give a file in a writable directory, the same one for every engine that "
                     "takes turns)");
  }
}

CpuTurnLock::~CpuTurnLock() {
  if (fd_ >= 0) ::close(fd_);
}

CpuTurnLock::Turn CpuTurnLock::take() {
  if (fd_ < 0) return Turn(-1);
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno != EINTR) {
      throw RuntimeFailure("--cpu-turn-lock: cannot lock " + path_ + ": " + std::strerror(errno));
    }
  }
  return Turn(fd_);
}

CpuTurnLock::Turn::~Turn() {
  if (fd_ >= 0) ::flock(fd_, LOCK_UN);
}

}  // namespace gpufrac::engine
