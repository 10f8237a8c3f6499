// `gpufrac down`: stops a node started by `gpufrac up`, from any process: asks the node process to
// drain and stop, then makes sure that every process it recorded (models by pid and start time,
// MPS daemons) is gone — and touches nothing else.
#pragma once

namespace gpufrac {
int down_command(int argc, char** argv);
}  // namespace gpufrac
