#include "k8s/pod_gpu_env.h"

#include <cctype>
#include <vector>

#include "common/error.h"
#include "common/strings.h"

namespace gpufrac::k8s {
namespace {

constexpr const char* kShareHint = "a number in (0, 1] like 0.5";

std::optional<std::string> value_of(const EnvLookup& lookup, const char* name) {
  const char* value = lookup(name);
  if (!value || !*value) return std::nullopt;
  return std::string(value);
}

// A share in (0, 1]: "0.5", or "50%" where percent is allowed.
std::optional<double> parse_share(const std::string& text, bool percent_allowed) {
  std::string number(trim(text));
  double scale = 1;
  if (percent_allowed && !number.empty() && number.back() == '%') {
    number.pop_back();
    scale = 100;
  }
  try {
    double share = parse_double(number, "share") / scale;
    if (share > 0 && share <= 1) return share;
  } catch (const UsageError&) {
  }
  return std::nullopt;
}

bool uuid_like(const std::string& text) {
  if (!text.starts_with("GPU-") || text.size() < 8) return false;
  for (char c : text.substr(4)) {
    if (!(std::isxdigit(static_cast<unsigned char>(c)) || c == '-')) return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> visible_gpu_uuid(const std::string& value) {
  std::string text(trim(value));
  size_t equals = text.rfind('=');
  if (equals != std::string::npos) text = text.substr(equals + 1);  // a CDI device name
  if (uuid_like(text)) return text;
  return std::nullopt;
}

PodGpuEnv read_pod_gpu_env(const EnvLookup& lookup, SharingMode mode) {
  PodGpuEnv env;
  std::vector<std::string> problems;
  bool shared = mode != SharingMode::kDedicated;

  std::optional<std::string> devices = value_of(lookup, "NVIDIA_VISIBLE_DEVICES");
  if (!devices) {
    if (shared) {
      problems.push_back(
          "NVIDIA_VISIBLE_DEVICES: not set; expected the GPU's UUID (GPU-...), which KAI sets for "
          "a pod "
          "with a gpu-fraction or gpu-memory annotation (is the pod scheduled by kai-scheduler, "
          "with "
          "GPU sharing enabled in KAI?)");
    }
  } else if (std::optional<std::string> uuid = visible_gpu_uuid(*devices)) {
    env.gpu_uuid = *uuid;
  } else if (shared) {
    problems.push_back(
        "NVIDIA_VISIBLE_DEVICES: '" + *devices +
        "' is not one GPU; expected its UUID (GPU-...) or its " +
        "CDI name (k8s.device-plugin.nvidia.com/gpu=GPU-...): a fraction runs on one GPU");
  }

  std::optional<std::string> portion = value_of(lookup, "GPU_PORTION");
  if (portion) {
    env.gpu_portion = parse_share(*portion, false);
    if (!env.gpu_portion) {
      problems.push_back("GPU_PORTION: '" + *portion + "' is not a fraction of the GPU; expected " +
                         kShareHint + " (KAI sets it from the pod's gpu-fraction annotation)");
    }
  }
  if (std::optional<std::string> mib = value_of(lookup, "GPUFRAC_GPU_MEMORY_MIB")) {
    bool digits = mib->find_first_not_of("0123456789") == std::string::npos && mib->size() < 12;
    if (digits && std::stoull(*mib) > 0) {
      env.memory_mib = std::stoull(*mib);
    } else {
      problems.push_back("GPUFRAC_GPU_MEMORY_MIB: '" + *mib +
                         "' is not a size in MiB; expected a positive " +
                         "integer like 20000 (the pod's gpu-memory annotation)");
    }
  }
  bool memory_given = env.memory_mib || portion;
  if (shared && !memory_given) {
    problems.push_back(
        "GPU_PORTION: not set, and neither is GPUFRAC_GPU_MEMORY_MIB; expected one of them for the "
        "memory cap (KAI sets GPU_PORTION for a pod with gpu-fraction; the rendered pod passes "
        "gpu-memory as GPUFRAC_GPU_MEMORY_MIB)");
  }

  if (std::optional<std::string> share = value_of(lookup, "GPUFRAC_SM_SHARE")) {
    env.sm_share = parse_share(*share, true);
    if (!env.sm_share) {
      problems.push_back("GPUFRAC_SM_SHARE: '" + *share + "' is not a share of the SMs; expected " +
                         kShareHint + " or 50% (the pod's gpufrac/sm-share annotation)");
    }
  } else if (env.gpu_portion) {
    env.sm_share = env.gpu_portion;
  } else if (mode == SharingMode::kFractions && !portion) {
    problems.push_back("GPUFRAC_SM_SHARE: not set, and GPU_PORTION is not set either; expected " +
                       std::string(kShareHint) +
                       " (the pod's gpufrac/sm-share annotation) for the MPS SM share");
  }

  if (!problems.empty()) {
    std::string message;
    for (const std::string& p : problems) message += (message.empty() ? "" : "\n") + p;
    throw UsageError(message);
  }
  return env;
}

}  // namespace gpufrac::k8s
