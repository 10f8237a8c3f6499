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

namespace gpufrac::engine {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(uint64_t bytes, const std::string& what);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  uint64_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  uint64_t bytes_ = 0;
};

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(uint64_t bytes, const std::string& what);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  uint64_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  uint64_t bytes_ = 0;
};

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
