#include "common/epoll_set.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <string>

#include "common/error.h"

namespace gpufrac {

EpollSet::EpollSet() : fd_(::epoll_create1(EPOLL_CLOEXEC)) {
  if (fd_ < 0) throw RuntimeFailure(std::string("epoll_create1: ") + std::strerror(errno));
}

EpollSet::~EpollSet() {
  ::close(fd_);
}

namespace {

void control(int epoll_fd, int operation, int fd, uint64_t key, uint32_t events) {
  epoll_event event{};
  event.events = events;
  event.data.u64 = key;
  ::epoll_ctl(epoll_fd, operation, fd, &event);
}

}  // namespace

void EpollSet::add(int fd, uint64_t key, uint32_t events) {
  control(fd_, EPOLL_CTL_ADD, fd, key, events);
}

void EpollSet::modify(int fd, uint64_t key, uint32_t events) {
  control(fd_, EPOLL_CTL_MOD, fd, key, events);
}

void EpollSet::remove(int fd) {
  ::epoll_ctl(fd_, EPOLL_CTL_DEL, fd, nullptr);
}

int EpollSet::wait(std::vector<epoll_event>& ready, int64_t timeout_ns) {
  const int capacity = int(ready.size());
  timespec timeout{time_t(timeout_ns / 1'000'000'000), long(timeout_ns % 1'000'000'000)};
  int n = ::epoll_pwait2(fd_, ready.data(), capacity, timeout_ns < 0 ? nullptr : &timeout, nullptr);
  if (n < 0 && errno == ENOSYS) {  // kernels before 5.11: millisecond timeouts
    int timeout_ms =
        timeout_ns < 0 ? -1 : int(std::min<int64_t>((timeout_ns + 999'999) / 1'000'000, INT32_MAX));
    n = ::epoll_wait(fd_, ready.data(), capacity, timeout_ms);
  }
  if (n < 0 && errno == EINTR) return 0;
  return n;
}

}  // namespace gpufrac
