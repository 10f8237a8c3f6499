// Helpers shared by the router tests (router_test, router_access_test, router_resilience_test).
#pragma once

#include <string>
#include <utility>

#include "node/router.h"

namespace gpufrac::testing {

// A replica the router may send to: ready at host:port, serving `served` (empty: as named).
inline ReplicaState ready_at(int port, std::string served = "", std::string host = "127.0.0.1") {
  ReplicaState s;
  s.host = std::move(host);
  s.port = port;
  s.ready = true;
  s.state = "ready";
  s.served_name = std::move(served);
  return s;
}

}  // namespace gpufrac::testing
