// `gpufrac bench`: the load generator's command line (see --help), built on bench_run.h.
#pragma once

#include <string>

#include "bench/bench_run.h"

namespace gpufrac {

int bench_command(int argc, char** argv);

// "--target URL[=MODEL]" -> a target; the model stays "" when not given (ask the server).
BenchTarget parse_target(const std::string& text, Endpoint endpoint);
// Fills an empty model name from the server's GET /v1/models (its only model).
void resolve_model(BenchTarget& target);

}  // namespace gpufrac
