#include "engine/cpu/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

// AVX2+FMA clones on x86-64 (picked once at load time by the dynamic loader), plain SSE elsewhere.
#if defined(__x86_64__)
#define GPUFRAC_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define GPUFRAC_SIMD_CLONES
#endif

namespace gpufrac::engine::cpu {

namespace {

// Weight tiles of about this many floats (128 KiB) stay in L2 while every token passes over them.
constexpr int64_t kTileFloats = 32 * 1024;
constexpr int64_t kTokenBlock = 16;

// Four dot products of x against four weight rows at once: x is loaded once per element.
GPUFRAC_SIMD_CLONES
void dot4(const float* x, const float* w0, const float* w1, const float* w2, const float* w3,
          int64_t n, float* out) {
  float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
  for (int64_t i = 0; i < n; ++i) {
    a0 += x[i] * w0[i];
    a1 += x[i] * w1[i];
    a2 += x[i] * w2[i];
    a3 += x[i] * w3[i];
  }
  out[0] = a0;
  out[1] = a1;
  out[2] = a2;
  out[3] = a3;
}

}  // namespace

GPUFRAC_SIMD_CLONES
float dot(const float* a, const float* b, int64_t n) {
  float acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

void linear(ThreadPool& pool, const float* x, int64_t tokens, const HostTensor& w,
            const float* bias, float* y, bool accumulate) {
  int64_t out = w.rows(), in = w.cols();
  int64_t tile = std::clamp<int64_t>(kTileFloats / in, 1, 256);
  tile = (tile + 3) / 4 * 4;
  const auto* weight_bytes = static_cast<const unsigned char*>(w.data);
  size_t row_bytes = size_t(in) * dtype_bytes(w.dtype);
  pool.parallel_for(out, tile, [&](int64_t r0, int64_t r1) {
    thread_local std::vector<float> tile_f32;
    tile_f32.resize(size_t((r1 - r0) * in));
    convert_to_f32(weight_bytes + r0 * row_bytes, w.dtype, tile_f32.data(), (r1 - r0) * in);
    for (int64_t t0 = 0; t0 < tokens; t0 += kTokenBlock) {
      int64_t t1 = std::min(tokens, t0 + kTokenBlock);
      for (int64_t r = r0; r < r1; r += 4) {
        int64_t rows = std::min<int64_t>(4, r1 - r);
        const float* w0 = tile_f32.data() + (r - r0) * in;
        const float* w1 = rows > 1 ? w0 + in : w0;
        const float* w2 = rows > 2 ? w0 + 2 * in : w0;
        const float* w3 = rows > 3 ? w0 + 3 * in : w0;
        for (int64_t t = t0; t < t1; ++t) {
          float sums[4];
          dot4(x + t * in, w0, w1, w2, w3, in, sums);
          float* y_row = y + t * out + r;
          for (int64_t k = 0; k < rows; ++k) {
            float value = sums[k] + (bias ? bias[r + k] : 0.0f);
            y_row[k] = accumulate ? y_row[k] + value : value;
          }
        }
      }
    }
  });
}

void rms_norm(const float* x, const float* weight, int64_t width, double eps, float* out) {
  float mean_square = dot(x, x, width) / float(width);
  float scale = 1.0f / std::sqrt(mean_square + float(eps));
  for (int64_t i = 0; i < width; ++i) out[i] = x[i] * scale * weight[i];
}

void apply_rope(float* head, const float* cos_sin, int64_t head_dim) {
  int64_t half = head_dim / 2;
  const float* cos = cos_sin;
  const float* sin = cos_sin + half;
  for (int64_t i = 0; i < half; ++i) {
    float first = head[i], second = head[i + half];
    head[i] = first * cos[i] - second * sin[i];
    head[i + half] = second * cos[i] + first * sin[i];
  }
}

}  // namespace gpufrac::engine::cpu
