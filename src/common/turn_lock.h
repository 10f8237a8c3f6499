// TurnLock: processes that open the same file take turns at something, one at a time: a turn is
// an exclusive flock on the file, held from take() (or a successful try_take()) until its Turn
// is destroyed, and released by the kernel when the holder dies. Two uses in the engine:
//   --cpu-turn-lock   the CPU runner computes each step during a turn, so CPU engines take turns
//                     on the cores as CUDA contexts of different processes take turns on a GPU
//                     without MPS (a time-sliced GPU's CPU analogue);
//   --kv-map-lock     elastic CUDA engines on one GPU map KV memory during a turn, so that when
//                     one checks the free memory no other is halfway through mapping.
//
// The lock belongs to the open file description, so two TurnLocks on one path exclude each other
// even within one process. A lock made without a path takes no turns (every turn is granted at
// once). Not thread-safe: one Turn at a time per object.
#pragma once

#include <optional>
#include <string>

namespace gpufrac {

class TurnLock {
 public:
  // Opens (creating) `path`, or takes no turns when it is empty; UsageError naming `option`
  // (the command-line flag that gave the path) when it cannot.
  TurnLock(const std::string& path, const std::string& option);
  ~TurnLock();
  TurnLock(const TurnLock&) = delete;
  TurnLock& operator=(const TurnLock&) = delete;

  // Held until destroyed.
  class Turn {
   public:
    ~Turn();
    Turn(Turn&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
    Turn& operator=(Turn&&) = delete;

   private:
    friend class TurnLock;
    explicit Turn(int fd) : fd_(fd) {}
    int fd_;
  };

  // Blocks until no other holder of the file has a turn. RuntimeFailure when flock fails for
  // another reason than a signal.
  [[nodiscard]] Turn take();
  // A turn now, or nullopt when another holder has one.
  [[nodiscard]] std::optional<Turn> try_take();

  const std::string& path() const { return path_; }

 private:
  // flock(fd_, operation), again after a signal; false when LOCK_NB finds the file locked.
  bool lock(int operation);

  std::string path_;
  std::string option_;
  int fd_ = -1;
};

}  // namespace gpufrac
