#include "common/turn_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace gpufrac {

TurnLock::TurnLock(const std::string& path, const std::string& option)
    : path_(path), option_(option) {
  if (path.empty()) return;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw UsageError(option + ": cannot open " + path + ": " + std::strerror(errno) +
                     " (give a file in a writable directory, the same one for every engine that "
                     "takes turns)");
  }
}

TurnLock::~TurnLock() {
  if (fd_ >= 0) ::close(fd_);
}

bool TurnLock::lock(int operation) {
  while (::flock(fd_, operation) != 0) {
    if (errno == EWOULDBLOCK) return false;
    if (errno != EINTR) {
      throw RuntimeFailure(option_ + ": cannot lock " + path_ + ": " + std::strerror(errno));
    }
  }
  return true;
}

TurnLock::Turn TurnLock::take() {
  if (fd_ >= 0) lock(LOCK_EX);
  return Turn(fd_);
}

std::optional<TurnLock::Turn> TurnLock::try_take() {
  if (fd_ >= 0 && !lock(LOCK_EX | LOCK_NB)) return std::nullopt;
  return Turn(fd_);
}

TurnLock::Turn::~Turn() {
  if (fd_ >= 0) ::flock(fd_, LOCK_UN);
}

}  // namespace gpufrac
