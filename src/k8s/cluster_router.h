// The router of a cluster (`gpufrac k8s router`): the node's Router (node/router.h) in front of
// models that run elsewhere — each model's Kubernetes Service, which balances over its ready
// pods — so that every model has one address, as on a node. Each upstream is given as
// NAME=URL, where URL is the model's health URL ("qwen-a=http://demo-qwen-a:8000/health"): its
// scheme, host and port are where requests go, its path is polled every poll_interval_s, and a
// model is ready while that answers 200 (its served name is learnt from /v1/models then, as the
// node does). A request for a model that is not ready waits up to restart_wait_s for it, as on a
// node (node/router.h); 0 answers 503 at once. Each upstream may carry the keys that may call it
// and its admission limits, checked as the node's router checks them (node/router.h). Thread-safe:
// the watcher runs on its own thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/http_client.h"
#include "node/router.h"

namespace gpufrac::k8s {

struct Upstream {
  std::string model;
  std::string health_url;  // as given
  std::string base_url;    // scheme://host:port
  HttpUrl url;
  std::vector<std::string> api_keys;  // who may call it; empty for every upstream: anyone
  int max_requests_in_flight = 0;     // 0: no limit
  double requests_per_second = 0;     // 0: no limit
};

// Parses --upstream values; throws UsageError naming the value and the expected form.
std::vector<Upstream> parse_upstreams(const std::vector<std::string>& values);

// Adds the per-model flags of `gpufrac k8s router` to parsed upstreams: --api-keys-env NAME=VAR
// (the model's keys are in $VAR, from the Secret render names), --max-requests-in-flight NAME=N,
// --requests-per-second NAME=R. Throws UsageError for an unknown model, a bad value, an unset or
// empty variable, or keys for some models but not all (one line, never a key).
struct UpstreamAccessFlags {
  std::vector<std::string> api_keys_env;
  std::vector<std::string> max_requests_in_flight;
  std::vector<std::string> requests_per_second;
};
void apply_access_flags(std::vector<Upstream>& upstreams, const UpstreamAccessFlags& flags);

class ClusterRouter {
 public:
  ClusterRouter(HttpServerOptions listen, std::vector<Upstream> upstreams,
                double poll_interval_s = 1, double restart_wait_s = 30);
  ~ClusterRouter();  // stop()

  void start();  // binds (throws RuntimeFailure naming the address) and starts watching
  int port() const { return router_.port(); }
  // Drains (new requests 503, up to drain_timeout_s for those in flight) and stops.
  void stop(double drain_timeout_s = 0);

 private:
  void watch();
  std::vector<Upstream> upstreams_;
  double poll_interval_s_;
  Router router_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread watcher_;
};

}  // namespace gpufrac::k8s
