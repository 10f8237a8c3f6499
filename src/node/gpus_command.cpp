#include "node/gpus_command.h"

#include <iostream>

#include "common/cli_args.h"
#include "node/gpus.h"

namespace gpufrac {

int gpus_command(int argc, char** argv) {
  CliArgs args("gpufrac gpus [--json]",
               "Lists the NVIDIA GPUs (UUID, name, memory, SM count, MIG and compute mode), the\n"
               "processes using them and the MPS daemons running. NVML is loaded at run time; on a\n"
               "machine without an NVIDIA driver it says so and shows the CPU cores and memory that\n"
               "a node uses as its one \"GPU\" instead.");
  args.flag("json", "Print JSON instead of a table (for scripts).")
      .section("Examples",
               "  gpufrac gpus\n"
               "      GPU UUID                                     NAME          MEMORY   USED  SMS ...\n"
               "      0   GPU-5a7c...                              NVIDIA H200   140 GiB  0 B   132 ...\n"
               "  gpufrac gpus --json | jq '.gpus[].uuid'\n"
               "      the UUIDs to put in a node spec's gpus: list");
  if (!args.parse(argc, argv)) return 0;
  MachineInventory inventory = discover_machine();
  if (args.flag_set("json")) {
    std::cout << inventory_to_json(inventory).dump(2) << "\n";
  } else {
    std::cout << format_inventory(inventory);
  }
  return 0;
}

}  // namespace gpufrac
