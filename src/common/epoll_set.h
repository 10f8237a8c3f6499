// An epoll instance for the project's client event loops (bench's StreamClient, node's
// UpstreamProxy): sockets registered under a 64-bit key of the owner's choosing, and a wait with a
// nanosecond timeout (epoll_pwait2; on kernels before 5.11, epoll_wait with the timeout rounded
// up to the next millisecond, never down, so a loop never wakes before its deadline).
//
// Owns the epoll fd (closed by the destructor). Not thread-safe: one loop thread uses it;
// registering from another thread is safe for the kernel but the owners don't do it.
#pragma once

#include <sys/epoll.h>

#include <cstdint>
#include <vector>

namespace gpufrac {

class EpollSet {
 public:
  EpollSet();  // throws RuntimeFailure when the kernel refuses an epoll instance
  ~EpollSet();
  EpollSet(const EpollSet&) = delete;
  EpollSet& operator=(const EpollSet&) = delete;

  // `events`: EPOLLIN, EPOLLOUT, EPOLLRDHUP, ... (EPOLLERR and EPOLLHUP are always reported).
  void add(int fd, uint64_t key, uint32_t events);
  void modify(int fd, uint64_t key, uint32_t events);
  void remove(int fd);

  // Waits until some registered fd is ready or `timeout_ns` has passed (negative: no limit) and
  // fills `ready` (up to its size; its entries' data.u64 are the keys). Returns how many entries
  // were filled: 0 on timeout or when a signal interrupted the wait, -1 (errno set) on an error.
  int wait(std::vector<epoll_event>& ready, int64_t timeout_ns);

 private:
  int fd_ = -1;
};

}  // namespace gpufrac
