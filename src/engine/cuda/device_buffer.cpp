#include "engine/cuda/device_buffer.h"

#include <cuda_runtime.h>

#include <utility>

#include "common/error.h"
#include "common/strings.h"
#include "engine/cuda/cuda_check.h"

namespace gpufrac::engine {

DeviceMemoryInfo device_memory_info() {
  size_t free_bytes = 0, total_bytes = 0;
  GPUFRAC_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return {free_bytes, total_bytes};
}

DeviceBuffer::DeviceBuffer(uint64_t bytes, const std::string& what) : bytes_(bytes) {
  if (bytes == 0) return;
  cudaError_t status = cudaMalloc(&data_, bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();  // allocation errors are not sticky; clear the last-error slot
    data_ = nullptr;
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
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

PinnedBuffer::PinnedBuffer(uint64_t bytes, const std::string& what) : bytes_(bytes) {
  if (bytes == 0) return;
  cudaError_t status = cudaMallocHost(&data_, bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();
    data_ = nullptr;
    throw RuntimeFailure("cannot allocate " + format_bytes(bytes) + " of page-locked host memory for " +
                         what + ": " + cudaGetErrorString(status));
  }
}

PinnedBuffer::~PinnedBuffer() {
  if (data_) cudaFreeHost(data_);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

}  // namespace gpufrac::engine
