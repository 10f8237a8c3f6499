#include "engine/cuda/device_buffer.h"

#include <cuda_runtime.h>

#include "common/error.h"
#include "common/strings.h"
#include "engine/cuda/cuda_check.h"

namespace gpufrac::engine {

DeviceMemoryInfo device_memory_info() {
  size_t free_bytes = 0, total_bytes = 0;
  GPUFRAC_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return {free_bytes, total_bytes};
}

void* allocate_cuda_memory(CudaMemoryKind kind, uint64_t bytes, const std::string& what) {
  if (bytes == 0) return nullptr;
  void* data = nullptr;
  const bool device = kind == CudaMemoryKind::kDevice;
  cudaError_t status = device ? cudaMalloc(&data, bytes) : cudaMallocHost(&data, bytes);
  if (status == cudaSuccess) return data;
  cudaGetLastError();  // allocation errors are not sticky; clear the last-error slot
  if (!device) {
    throw RuntimeFailure("cannot allocate " + format_bytes(bytes) +
                         " of page-locked host memory for " + what + ": " +
                         cudaGetErrorString(status));
  }
  if (status != cudaErrorMemoryAllocation) {
    throw RuntimeFailure("cannot allocate " + format_bytes(bytes) + " of GPU memory for " + what +
                         ": " + cudaGetErrorString(status));
  }
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  throw RuntimeFailure("out of GPU memory allocating " + format_bytes(bytes) + " for " + what +
                       " (" + format_bytes(free_bytes) + " free of " + format_bytes(total_bytes) +
                       ")");
}

void release_cuda_memory(CudaMemoryKind kind, void* data) {
  if (!data) return;
  if (kind == CudaMemoryKind::kDevice) {
    cudaFree(data);
  } else {
    cudaFreeHost(data);
  }
}

}  // namespace gpufrac::engine
