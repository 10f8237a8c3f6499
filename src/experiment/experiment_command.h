// `gpufrac experiment [SPEC]`: the main job (experiment_runner.h) from the command line.
#pragma once

namespace gpufrac {

int experiment_command(int argc, char** argv);

}  // namespace gpufrac
