// `gpufrac up SPEC`: starts a node (node.h) from a spec file and serves until stopped (Ctrl-C,
// SIGTERM, `gpufrac down`), or with --detach returns once the node is up and leaves it running.
#pragma once

namespace gpufrac {
int up_command(int argc, char** argv);
}  // namespace gpufrac
