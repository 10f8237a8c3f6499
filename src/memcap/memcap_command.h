// `gpufrac memcap`: runs any command under libgpufrac_memcap.so, a hard cap on the GPU memory it
// (and every process it starts) may allocate, for users outside a gpufrac node. It checks the
// configuration with the shim's own parser, sets LD_PRELOAD and the GPUFRAC_MEMCAP_* variables
// (memcap_config.h), and execs the command; or, with --print-env, prints those variables for a
// launcher of one's own. Throws UsageError for bad flags, RuntimeFailure when the shim is missing
// or the command cannot be started.
#pragma once

namespace gpufrac {

int memcap_command(int argc, char** argv);

}  // namespace gpufrac
