// `gpufrac k8s router --upstream NAME=URL...`: the cluster's router Deployment (cluster_router.h).
// Serves until SIGTERM, SIGINT or SIGHUP, then drains (up to --drain-timeout) and exits 0.
#pragma once

namespace gpufrac::k8s {

int router_command(int argc, char** argv);

}  // namespace gpufrac::k8s
