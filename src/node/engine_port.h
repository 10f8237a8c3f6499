// Engine ports: TCP ports on 127.0.0.1 for engines the node is about to start. Drawn at random
// from [20000, the low end of the kernel's ephemeral range) (net.ipv4.ip_local_port_range,
// 32768 by default) and free when checked (bound without SO_REUSEADDR). The kernel never hands
// out a port there on its own, neither as the source port of an outgoing connection (the
// router's connections to its engines, a client's) nor for a bind to port 0, so only another
// explicit choice can take one: another node on the machine drawing the same port before this
// node's engine has bound it. reserve_engine_port() closes that window for as long as the node
// needs before it starts its engines (MPS daemons, the router): the port stays bound, not
// listening, so every other draw (which binds too) finds it taken and draws again, in this
// process or any other. It falls back to a port the kernel chooses when the range is empty or
// 64 draws find nothing free, and throw RuntimeFailure when no socket can be bound at all.
// Thread-safe.
#pragma once

namespace gpufrac {

// A drawn port held bound until release() or destruction. Move-only.
class EnginePortReservation {
 public:
  EnginePortReservation(int port, int fd) : port_(port), fd_(fd) {}
  EnginePortReservation(EnginePortReservation&& other) noexcept;
  EnginePortReservation& operator=(EnginePortReservation&& other) noexcept;
  EnginePortReservation(const EnginePortReservation&) = delete;
  EnginePortReservation& operator=(const EnginePortReservation&) = delete;
  ~EnginePortReservation() { release(); }

  int port() const { return port_; }
  // Unbinds the port, for the engine to bind it: call it just before that engine starts.
  void release();

 private:
  int port_ = 0;
  int fd_ = -1;
};

EnginePortReservation reserve_engine_port();

}  // namespace gpufrac
