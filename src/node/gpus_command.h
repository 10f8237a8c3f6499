// `gpufrac gpus`: what the machine has for models: GPUs (through NVML, loaded at run time), their
// processes and the MPS daemons running, or the CPU that stands in for a GPU without one.
#pragma once

namespace gpufrac {
int gpus_command(int argc, char** argv);
}  // namespace gpufrac
