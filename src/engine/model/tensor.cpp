#include "engine/model/tensor.h"

#include <cmath>
#include <sstream>

namespace gpufrac::engine {

size_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
    case DType::kF16:
      return 2;
    case DType::kF32:
      return 4;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kF32:
      return "F32";
  }
  return "?";
}

float fp16_to_float(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  uint32_t out;
  if (exponent == 0x1f) {
    out = sign | 0x7f800000u | (mantissa << 13);  // inf or NaN
  } else if (exponent != 0) {
    out = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    out = sign;
  } else {  // subnormal: value = mantissa * 2^-24
    float value = std::ldexp(float(mantissa), -24);
    return sign ? -value : value;
  }
  float value;
  std::memcpy(&value, &out, sizeof value);
  return value;
}

uint16_t float_to_fp16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;  // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: infinity
  if (magnitude < 0x38800000u) {  // below 2^-14: subnormal or zero, value / 2^-24 rounded
    float scaled = std::fabs(value) * 16777216.0f;
    return sign | uint16_t(std::nearbyint(scaled));
  }
  uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);  // nearest, ties to even
  return sign | uint16_t((rounded - (112u << 23)) >> 13);
}

int64_t HostTensor::numel() const {
  if (shape.empty()) return data ? 1 : 0;
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  return count;
}

std::string HostTensor::shape_string() const {
  std::ostringstream text;
  text << "[";
  for (size_t i = 0; i < shape.size(); ++i) text << (i ? ", " : "") << shape[i];
  text << "]";
  return text.str();
}

namespace {

float load_as_float(const unsigned char* src, DType from) {
  if (from == DType::kF32) {
    float value;
    std::memcpy(&value, src, 4);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, src, 2);
  return from == DType::kBF16 ? bf16_to_float(bits) : fp16_to_float(bits);
}

void store_float(float value, unsigned char* dst, DType to) {
  if (to == DType::kF32) {
    std::memcpy(dst, &value, 4);
    return;
  }
  uint16_t bits = to == DType::kBF16 ? float_to_bf16(value) : float_to_fp16(value);
  std::memcpy(dst, &bits, 2);
}

}  // namespace

void convert_elements(const void* src, DType from, void* dst, DType to, int64_t count) {
  if (from == to) {
    std::memcpy(dst, src, size_t(count) * dtype_bytes(from));
    return;
  }
  const auto* in = static_cast<const unsigned char*>(src);
  auto* out = static_cast<unsigned char*>(dst);
  size_t in_step = dtype_bytes(from), out_step = dtype_bytes(to);
  if (from == DType::kBF16 && to == DType::kF32) {  // the hot case of the CPU runner
    for (int64_t i = 0; i < count; ++i) {
      uint16_t bits;
      std::memcpy(&bits, in + i * 2, 2);
      float value = bf16_to_float(bits);
      std::memcpy(out + i * 4, &value, 4);
    }
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    store_float(load_as_float(in + i * in_step, from), out + i * out_step, to);
  }
}

}  // namespace gpufrac::engine
