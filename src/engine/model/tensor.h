// Host tensors of model weights and the scalar types they come in.
//
// A HostTensor is a view: a dtype, a row-major shape and a pointer to bytes that someone else
// keeps alive (for model weights: ModelWeights::storage, an mmapped checkpoint or an owned
// buffer). Linear weights are [out, in], as Hugging Face stores them. Copying a view copies no
// data. The pointer may be unaligned (a safetensors file whose header length is not padded to a
// multiple of 8 misaligns its data; Hugging Face pads), so readers here use memcpy-safe loads.
//
// bf16 <-> fp32 conversion rounds to nearest even and keeps NaN a NaN; fp16 follows IEEE 754
// binary16 (subnormals, infinities). All functions are thread-safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace gpufrac::engine {

enum class DType : uint8_t { kBF16, kF16, kF32 };

size_t dtype_bytes(DType dtype);
// "BF16", "F16", "F32": the spelling of safetensors headers.
const char* dtype_name(DType dtype);

inline float bf16_to_float(uint16_t bits) {
  uint32_t wide = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

inline uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest, ties to even
  return uint16_t(bits >> 16);
}

float fp16_to_float(uint16_t bits);
uint16_t float_to_fp16(float value);

struct HostTensor {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // row-major; [out, in] for linear weights
  const void* data = nullptr;  // null: the tensor is absent (e.g. no q_norm outside Qwen3)

  bool empty() const { return data == nullptr; }
  int64_t numel() const;
  uint64_t bytes() const { return uint64_t(numel()) * dtype_bytes(dtype); }
  int64_t rows() const { return shape.empty() ? 0 : shape[0]; }
  int64_t cols() const { return shape.size() < 2 ? 1 : numel() / shape[0]; }
  // "[4096, 2560]"
  std::string shape_string() const;
};

// Converts `count` elements at `src` (of dtype `from`) to `to` at `dst`. The ranges must not
// overlap. Unaligned source and destination pointers are fine.
void convert_elements(const void* src, DType from, void* dst, DType to, int64_t count);

inline void convert_to_f32(const void* src, DType from, float* dst, int64_t count) {
  convert_elements(src, from, dst, DType::kF32, count);
}

}  // namespace gpufrac::engine
