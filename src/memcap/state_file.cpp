#include "memcap/state_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gpufrac::memcap {
namespace {

// Opens (creating) the file with a shared lock held for as long as it is open. The last user
// removes the file (remove_if_last_user); if that happened between our open and our lock, the
// name no longer leads to what we opened, so open again.
int open_locked(const char* path) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    int fd = ::open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return -1;
    struct stat opened, named;
    if (flock(fd, LOCK_SH) == 0 && fstat(fd, &opened) == 0 && stat(path, &named) == 0 &&
        opened.st_ino == named.st_ino && opened.st_dev == named.st_dev) {
      return fd;
    }
    ::close(fd);
  }
  errno = EAGAIN;
  return -1;
}

uint64_t pid_namespace_id() {
  struct stat st;
  if (stat("/proc/self/ns/pid", &st) != 0) return 0;
  return uint64_t(st.st_ino);
}

}  // namespace

bool StateFile::open(const char* state_dir, const char* path, size_t size, uint64_t magic,
                     const char* what, const char* owners, bool (*in_use)(const void* mapping),
                     char* error, size_t error_size) {
  close();
  if (mkdir(state_dir, 0700) != 0 && errno != EEXIST) {
    snprintf(error, error_size, "cannot create %s='%s': %s (point it at a writable directory)",
             kEnvStateDir, state_dir, strerror(errno));
    return false;
  }
  snprintf(path_, sizeof path_, "%s", path);
  int fd = open_locked(path_);
  if (fd < 0) {
    snprintf(error, error_size, "cannot open the %s %s: %s (check %s)", what, path_,
             strerror(errno), kEnvStateDir);
    return false;
  }
  struct stat st;
  bool sized = fstat(fd, &st) == 0 &&
               (st.st_size == off_t(size) || (st.st_size == 0 && ftruncate(fd, off_t(size)) == 0));
  if (!sized) {
    snprintf(error, error_size,
             "the %s %s has an unexpected size (another gpufrac version?); remove it once no "
             "process of %s runs",
             what, path_, owners);
    ::close(fd);
    return false;
  }
  void* mapping = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapping == MAP_FAILED) {
    snprintf(error, error_size, "cannot map the %s %s: %s", what, path_, strerror(errno));
    ::close(fd);
    return false;
  }
  auto* header = static_cast<StateFileHeader*>(mapping);
  uint64_t found = 0;
  if (!header->magic.compare_exchange_strong(found, magic) && found != magic) {
    snprintf(error, error_size, "%s is not a gpufrac memcap %s; remove it", path_, what);
    munmap(mapping, size);
    ::close(fd);
    return false;
  }
  // Liveness checks compare pids, so every process using the file must share one PID namespace.
  uint64_t namespace_id = pid_namespace_id();
  uint64_t stored = header->pid_namespace.load();
  while (stored != namespace_id) {
    if (stored != 0 && in_use(mapping)) {
      snprintf(error, error_size,
               "the %s %s is in use from another PID namespace (container); give each container "
               "its own %s",
               what, path_, kEnvStateDir);
      munmap(mapping, size);
      ::close(fd);
      return false;
    }
    if (header->pid_namespace.compare_exchange_strong(stored, namespace_id)) break;
  }
  mapping_ = mapping;
  size_ = size;
  fd_ = fd;
  return true;
}

void StateFile::close() {
  if (mapping_ != nullptr) munmap(mapping_, size_);
  if (fd_ >= 0) ::close(fd_);
  mapping_ = nullptr;
  fd_ = -1;
}

void StateFile::remove_if_last_user() {
  // Converting the shared lock to an exclusive one succeeds only if no other process holds the
  // file open; one that opens it now finds the name gone once it has its lock, and starts afresh.
  if (fd_ >= 0 && flock(fd_, LOCK_EX | LOCK_NB) == 0) unlink(path_);
}

void StateFile::reopen_lock_after_fork() {
  if (fd_ < 0) return;
  int own = ::open(path_, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  ::close(fd_);
  if (own >= 0 && flock(own, LOCK_SH) != 0) {
    ::close(own);
    own = -1;
  }
  fd_ = own;
}

}  // namespace gpufrac::memcap
