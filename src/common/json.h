// JSON for the whole project: nlohmann::json under one short name. Header-only (Debian's
// nlohmann-json3-dev), so binaries stay free of shared non-CUDA dependencies.
#pragma once

#include <nlohmann/json.hpp>

namespace gpufrac {
using Json = nlohmann::json;
}  // namespace gpufrac
