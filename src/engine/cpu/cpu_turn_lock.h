// CpuTurnLock: the CPU's analogue of a GPU time-sliced between processes. Engines that open the
// same file take turns on the cores: each holds an exclusive flock on it while it computes a
// step, so at most one of them runs a forward pass at a time, as the CUDA contexts of different
// processes never run kernels at once on a GPU without MPS. Everything outside a step (HTTP,
// scheduling, detokenizing) is not covered and runs concurrently, as an engine's host side does
// beside a time-sliced GPU. Without it, processes on the CPU share the cores at once, each on
// some of them: that is a spatial share (what fractions emulate), not time-slicing.
//
// The lock belongs to the open file description, so two CpuTurnLocks on one path exclude each
// other even within one process. A lock made without a path takes no turns. Not thread-safe: one
// Turn at a time per object (the runner's step thread).
#pragma once

#include <string>

namespace gpufrac::engine {

class CpuTurnLock {
 public:
  // Opens (creating) `path`, or takes no turns when it is empty; UsageError naming
  // --cpu-turn-lock when it cannot.
  explicit CpuTurnLock(const std::string& path);
  ~CpuTurnLock();
  CpuTurnLock(const CpuTurnLock&) = delete;
  CpuTurnLock& operator=(const CpuTurnLock&) = delete;

  // Held from take() until destroyed.
  class Turn {
   public:
    ~Turn();
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;

   private:
    friend class CpuTurnLock;
    explicit Turn(int fd) : fd_(fd) {}
    int fd_;
  };

  // Blocks until no other holder of the file computes; returns at once when the lock is unset.
  // RuntimeFailure when flock fails for another reason than a signal.
  [[nodiscard]] Turn take();

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace gpufrac::engine
