// Who holds a slot in a tenant's ledger: a process identity packs the pid with the low 32 bits of
// the process's start time (clock ticks after boot, /proc/PID/stat field 22), so that a pid the
// kernel hands to a new process after the old one died is not mistaken for the old one.
//
// Layout of the 64-bit word: bit 63 is free for the ledger's own flag, bits 32..62 the pid,
// bits 0..31 the start time. 0 is never a valid identity. The functions use only open, read,
// close and kill, so they are async-signal-safe (and safe in a fork child).
#pragma once

#include <stdint.h>
#include <sys/types.h>

namespace gpufrac::memcap {

inline constexpr uint64_t kIdentityFlagBit = uint64_t(1) << 63;

inline uint64_t make_identity(pid_t pid, uint64_t start_ticks) {
  return (uint64_t(uint32_t(pid) & 0x7fffffffu) << 32) | (start_ticks & 0xffffffffu);
}
inline pid_t identity_pid(uint64_t identity) {
  return pid_t((identity >> 32) & 0x7fffffffu);
}

// The start time of a process; false if /proc/PID/stat cannot be read or parsed. `zombie` tells
// whether it has exited and waits to be reaped (state Z or X).
bool read_process_start(pid_t pid, uint64_t* start_ticks, bool* zombie);

// This process's identity (0 if /proc/self/stat is unreadable, which does not happen on Linux).
uint64_t current_process_identity();

// False only when the process is surely gone: no such pid, a zombie, or the pid now belongs to
// a process with another start time. A process we may not signal or whose /proc entry we cannot
// read counts as alive: never free memory that may still be in use.
bool identity_alive(uint64_t identity);

}  // namespace gpufrac::memcap
