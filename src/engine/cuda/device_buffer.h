// Owning handles for GPU memory (cudaMalloc) and page-locked host memory (cudaMallocHost).
//
// Contract: allocation failures throw RuntimeFailure naming what was being allocated, its size
// and the free device memory at that moment (so an out-of-memory under an MPS or preload cap
// says how far off it was). Move-only; the memory is freed by the destructor. Not thread-safe
// (like any object); the memory itself may be used from any stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace gpufrac::engine {

enum class CudaMemoryKind {
  kDevice,      // cudaMalloc / cudaFree
  kPinnedHost,  // cudaMallocHost / cudaFreeHost
};

// The allocation and release behind CudaMemory (device_buffer.cpp): allocate throws as the
// contract above says and returns nullptr for 0 bytes; release ignores nullptr.
void* allocate_cuda_memory(CudaMemoryKind kind, uint64_t bytes, const std::string& what);
void release_cuda_memory(CudaMemoryKind kind, void* data);

template <CudaMemoryKind kKind>
class CudaMemory {
 public:
  CudaMemory() = default;
  CudaMemory(uint64_t bytes, const std::string& what)
      : data_(allocate_cuda_memory(kKind, bytes, what)), bytes_(bytes) {}
  ~CudaMemory() { release_cuda_memory(kKind, data_); }
  CudaMemory(CudaMemory&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  CudaMemory& operator=(CudaMemory&& other) noexcept {
    if (this != &other) {
      release_cuda_memory(kKind, data_);
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  uint64_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  uint64_t bytes_ = 0;
};

using DeviceBuffer = CudaMemory<CudaMemoryKind::kDevice>;
using PinnedBuffer = CudaMemory<CudaMemoryKind::kPinnedHost>;

// Free and total device memory of the current device as the driver reports them to this process
// (under MPS or a preload cap, `free` is what this process may still take).
struct DeviceMemoryInfo {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};
DeviceMemoryInfo device_memory_info();

// Rounds up to a multiple of 256 bytes: every sub-buffer carved from a DeviceBuffer starts
// aligned for 16-byte vector loads and for cuBLASLt.
inline uint64_t align_up_256(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace gpufrac::engine
