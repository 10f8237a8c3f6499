// The fp32 building blocks of the CPU forward pass. Activations are row-major float matrices
// [tokens, width]; weights are HostTensors of any dtype, converted to fp32 a tile of rows at a
// time (nothing is expanded to fp32 as a whole).
//
// Results are deterministic: every output element is computed by one thread in a fixed order,
// so they do not depend on the thread count or on which other rows share the call. Dot products
// use SIMD (AVX2+FMA where the CPU has it, chosen at load time), accumulating in fp32.
#pragma once

#include <cstdint>

#include "common/thread_pool.h"
#include "engine/model/tensor.h"

namespace gpufrac::engine::cpu {

float dot(const float* a, const float* b, int64_t n);

// y[t, r] (=, or += when accumulate) sum_i x[t, i] * w[r, i] + bias[r] for t < tokens and
// r < w.rows(); x is [tokens, w.cols()], y is [tokens, w.rows()]; bias may be null.
void linear(ThreadPool& pool, const float* x, int64_t tokens, const HostTensor& w,
            const float* bias, float* y, bool accumulate);

// out = x / sqrt(mean(x^2) + eps) * weight over `width` elements; out may alias x.
void rms_norm(const float* x, const float* weight, int64_t width, double eps, float* out);

// Rotate-half RoPE on one head of `head_dim` in place: element i pairs with i + head_dim/2 and
// turns by angle[i] (cos_sin holds cos then sin of each of the head_dim/2 angles).
void apply_rope(float* head, const float* cos_sin, int64_t head_dim);

}  // namespace gpufrac::engine::cpu
