// pick_engine_port: a TCP port on 127.0.0.1 for an engine the node is about to start. Drawn at
// random from [20000, the low end of the kernel's ephemeral range) (net.ipv4.ip_local_port_range,
// 32768 by default) and free when checked (bound, without SO_REUSEADDR, and released). The kernel
// never hands out a port there on its own, neither as the source port of an outgoing connection
// (the router's connections to its engines, a client's) nor for a bind to port 0, so between this
// check and the engine's bind only another explicit choice can take it; a port the kernel chose
// would come from the very range those draw from. Falls back to a port the kernel chooses when
// the range is empty or 64 draws find nothing free. Throws RuntimeFailure when no socket can be
// bound at all. Thread-safe.
#pragma once

namespace gpufrac {

int pick_engine_port();

}  // namespace gpufrac
