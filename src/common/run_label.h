// The name of an arm at a packing, "<arm>-m<models per GPU>" ("fractions-m2"): bench's result
// directory for it (docs/result-format.md), the experiment's node name and arm directory, and the
// report's label for it are all spelled by these functions, as is the identifier form
// "<arm>_m<N>" that the report's CSV columns use. Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace gpufrac {

// "-m<N>": the packing part alone (the report appends it to an arm's display name).
inline std::string models_per_gpu_suffix(int models_per_gpu) {
  return "-m" + std::to_string(models_per_gpu);
}

// "<arm>-m<N>".
inline std::string run_label(std::string_view arm, int models_per_gpu) {
  return std::string(arm) + models_per_gpu_suffix(models_per_gpu);
}

// "<arm>_m<N>": the same name as an identifier (CSV column keys).
inline std::string run_key(std::string_view arm, int models_per_gpu) {
  return std::string(arm) + "_m" + std::to_string(models_per_gpu);
}

}  // namespace gpufrac
