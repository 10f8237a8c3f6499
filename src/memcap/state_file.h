// A file in the memcap state directory, mapped shared by every process that uses it: the tenant
// ledgers (tenant_ledger.h) and the device pools (pool_ledger.h) are each one.
//
// open() creates the directory (0700) and the file (0600, zero-filled to its size) if needed,
// checks the file's size and magic number (the first word of the layout, set by the first opener),
// and that every process using it shares one PID namespace (liveness checks compare pids). Every
// process holds a shared flock on the file while it has it open; the last one to leave
// (remove_if_last_user, at exit) removes the file. A killed process leaves it; the next one
// carries on.
//
// Not thread-safe by itself (its owner opens and closes it once); reopen_lock_after_fork() is
// what a fork child calls first, before anything else. The mapping lives until close().
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <atomic>

#include "memcap/memcap_config.h"

namespace gpufrac::memcap {

// The first words of every state file's layout.
struct StateFileHeader {
  std::atomic<uint64_t> magic;
  std::atomic<uint64_t> pid_namespace;  // the processes using it must see the same pids
};

class StateFile {
 public:
  constexpr StateFile() = default;
  StateFile(const StateFile&) = delete;
  StateFile& operator=(const StateFile&) = delete;

  // Maps `path` (of at most kMaxStatePathLength characters) in `state_dir` with `size` bytes
  // whose first bytes are a StateFileHeader. `what` names the file in messages ("tenant ledger"),
  // `owners` who may hold it ("tenant 'a'"). `in_use(mapping)` says whether a process may hold
  // it now (it is then refused to a process of another PID namespace). On failure returns false
  // with one line in `error`.
  bool open(const char* state_dir, const char* path, size_t size, uint64_t magic, const char* what,
            const char* owners, bool (*in_use)(const void* mapping), char* error,
            size_t error_size);
  void close();
  void* mapping() const { return mapping_; }
  const char* path() const { return path_; }
  // Removes the file if no other process has it open; the mapping stays usable.
  void remove_if_last_user();
  // The inherited descriptor shares its lock with the parent's: take one of our own, so that the
  // child's remove_if_last_user() cannot mistake the parent's lock for its own.
  void reopen_lock_after_fork();

  static constexpr size_t kMaxStatePathLength = kMaxStateDirLength + kMaxTenantLength + 64;

 private:
  void* mapping_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;  // open, with a shared flock, while mapping_ is set
  char path_[kMaxStatePathLength + 1] = {};
};

}  // namespace gpufrac::memcap
