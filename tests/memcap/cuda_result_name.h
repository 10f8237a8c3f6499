// The short names the memcap test probes print for CUDA driver results: "ok", "oom",
// "not_permitted", ... and "error<N>" for any other code. Shared by memcap_probe and
// driver_bypass_probe so that both speak the same words. Not thread-safe for unknown codes (one
// static buffer): the probes call it from one thread.
#pragma once

#include <stdio.h>

#include "memcap/cuda_abi.h"

inline const char* cuda_result_name(CUresult result) {
  switch (result) {
    case CUDA_SUCCESS:
      return "ok";
    case CUDA_ERROR_OUT_OF_MEMORY:
      return "oom";
    case CUDA_ERROR_NOT_PERMITTED:
      return "not_permitted";
    case CUDA_ERROR_NOT_SUPPORTED:
      return "not_supported";
    case CUDA_ERROR_INVALID_VALUE:
      return "invalid_value";
    case CUDA_ERROR_NOT_INITIALIZED:
      return "not_initialized";
    case CUDA_ERROR_INVALID_CONTEXT:
      return "invalid_context";
    default: {
      static char text[32];
      snprintf(text, sizeof text, "error%d", result);
      return text;
    }
  }
}
