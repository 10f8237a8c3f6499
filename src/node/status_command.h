// `gpufrac status`: per model of a node: GPU, mode, SM %, memory cap and use, state, restarts and
// URL, as a table or as JSON, read from the node's state file plus live memory numbers.
#pragma once

namespace gpufrac {
int status_command(int argc, char** argv);
}  // namespace gpufrac
