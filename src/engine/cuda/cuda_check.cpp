#include "engine/cuda/cuda_check.h"

#include <string>

#include "common/error.h"

namespace gpufrac::engine {

void throw_cuda_failure(const char* call, const char* file, int line, const char* message) {
  std::string where = file;
  size_t slash = where.rfind('/');
  if (slash != std::string::npos) where = where.substr(slash + 1);
  throw RuntimeFailure(std::string("CUDA error: ") + message + " in " + call + " (" + where + ":" +
                       std::to_string(line) + ")");
}

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  std::string message = std::string("cuBLAS ") + cublasLtGetStatusString(status);
  throw_cuda_failure(call, file, line, message.c_str());
}

void* driver_entry_point(const char* name, const char* purpose) {
  cudaDriverEntryPointQueryResult found{};
  void* pointer = nullptr;
  GPUFRAC_CUDA_CHECK(
      cudaGetDriverEntryPointByVersion(name, &pointer, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || pointer == nullptr) {
    throw RuntimeFailure(std::string(purpose) + ": the driver has no " + name);
  }
  return pointer;
}

}  // namespace gpufrac::engine
