#include "memcap/process_identity.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

namespace gpufrac::memcap {
namespace {

// "/proc/" + decimal pid + "/stat" without snprintf (kept async-signal-safe).
void stat_path(pid_t pid, char* out) {
  char digits[16];
  int n = 0;
  unsigned value = unsigned(pid);
  do {
    digits[n++] = char('0' + value % 10);
    value /= 10;
  } while (value != 0);
  memcpy(out, "/proc/", 6);
  char* p = out + 6;
  while (n > 0) *p++ = digits[--n];
  memcpy(p, "/stat", 6);
}

}  // namespace

bool read_process_start(pid_t pid, uint64_t* start_ticks, bool* zombie) {
  char path[40];
  if (pid == 0) {
    memcpy(path, "/proc/self/stat", 16);
  } else {
    stat_path(pid, path);
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buffer[1024];
  ssize_t length = 0;
  while (length < ssize_t(sizeof buffer) - 1) {
    ssize_t n = read(fd, buffer + length, sizeof buffer - 1 - size_t(length));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    length += n;
  }
  close(fd);
  if (length <= 0) return false;
  buffer[length] = '\0';
  // The command name (field 2) may hold spaces and ')': fields resume after the last ')'.
  char* p = strrchr(buffer, ')');
  if (p == nullptr || p[1] != ' ') return false;
  p += 2;  // field 3: state
  *zombie = *p == 'Z' || *p == 'X';
  for (int field = 3; field < 22; ++field) {
    p = strchr(p, ' ');
    if (p == nullptr) return false;
    ++p;
  }
  uint64_t value = 0;
  if (*p < '0' || *p > '9') return false;
  while (*p >= '0' && *p <= '9') value = value * 10 + uint64_t(*p++ - '0');
  *start_ticks = value;
  return true;
}

uint64_t current_process_identity() {
  uint64_t start = 0;
  bool zombie = false;
  if (!read_process_start(0, &start, &zombie)) return 0;
  return make_identity(getpid(), start);
}

bool identity_alive(uint64_t identity) {
  pid_t pid = identity_pid(identity);
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  uint64_t start = 0;
  bool zombie = false;
  if (!read_process_start(pid, &start, &zombie)) {
    // The process may have exited between kill() and open(): look once more.
    return !(kill(pid, 0) != 0 && errno == ESRCH);
  }
  if (zombie) return false;
  return (start & 0xffffffffu) == (identity & 0xffffffffu);
}

}  // namespace gpufrac::memcap
