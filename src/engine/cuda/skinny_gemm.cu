#include <algorithm>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device_math.cuh"
#include "engine/cuda/kernel_launch.cuh"
#include "engine/cuda/skinny_gemm.h"

namespace gpufrac::engine {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kBlockRows = kWarps * 16;  // weight rows of a block (the SiLU form: half gate)
constexpr int kStepK = 32;               // k per step: one 16-byte load per row and lane

struct SkinnyArgs {
  const bf16* x;
  const bf16* w;
  void* y;
  int m, n, k;
  int steps_per_split;
};

// Grid (row tiles, splits). Lane = 4 g + t. Warp `warp` of the block holds A rows g and g + 8:
// plain, weight rows tile * 64 + 16 warp + {g, g + 8}; SiLU, gate row f and up row n + f of
// feature f = tile * 32 + 8 warp + g, so c0/c1 (gate) and c2/c3 (up) of a token meet in one
// thread. A step of 32 k: the lane's 16 bytes of each of its rows and of token 8 j + g (tile j
// of kTiles) are k = 8 t .. 8 t + 7 of the step; the first MMA takes pairs 0 and 1 of them as the
// fragment's k = 2t, 2t + 1 and 2t + 8, 2t + 9, the second MMA pairs 2 and 3 (A and B permuted
// alike, so the sum is the dot product). Rows past n and tokens past m are clamped to the last
// (loads stay in bounds) and not stored.
template <int kTiles, bool kSilu, int kDepth>
__global__ void __launch_bounds__(kThreads) skinny_gemm_kernel(SkinnyArgs a) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int n = a.n, k = a.k, chunks = k / 8;
  int row_lo, row_hi;
  if constexpr (kSilu) {
    row_lo = blockIdx.x * (kBlockRows / 2) + warp * 8 + g;
    row_hi = n + min(row_lo, n - 1);
  } else {
    row_lo = blockIdx.x * kBlockRows + warp * 16 + g;
    row_hi = min(row_lo + 8, n - 1);
  }
  const int stored_lo = row_lo, stored_hi = kSilu ? row_lo : row_lo + 8;
  row_lo = min(row_lo, n - 1);
  const uint4* w_lo = reinterpret_cast<const uint4*>(a.w + int64_t(row_lo) * k) + t;
  const uint4* w_hi = reinterpret_cast<const uint4*>(a.w + int64_t(row_hi) * k) + t;
  const int first = blockIdx.y * a.steps_per_split;
  const int steps = min(a.steps_per_split, k / kStepK - first);

  // Weights in batches of kDepth steps (SkinnyForm::steps_per_batch): a batch's loads are all
  // issued, then all consumed, then the next batch's issued. (Reloading each step's registers
  // as soon as they are consumed kept about one step in flight, not kDepth: NOTES.md, version
  // 16.) x runs one step ahead.
  uint4 lo[kDepth], hi[kDepth];
  auto load_batch = [&](int base) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      if (base + d < steps) {
        lo[d] = load_streaming(w_lo + (first + base + d) * 4);
        hi[d] = load_streaming(w_hi + (first + base + d) * 4);
      }
    }
  };
  load_batch(0);
  wait_for_previous_grid();
  allow_next_grid_launch();

  const uint4* x_rows[kTiles];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    x_rows[j] = reinterpret_cast<const uint4*>(a.x) + int64_t(min(8 * j + g, a.m - 1)) * chunks + t;
  }
  uint4 xv[kTiles], x_next[kTiles];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) xv[j] = __ldg(x_rows[j] + first * 4);
  float acc[kTiles][4] = {};
  for (int base = 0; base < steps; base += kDepth) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      const int step = base + d;
      if (step < steps) {
        const bool more = step + 1 < steps;
        if (more) {
#pragma unroll
          for (int j = 0; j < kTiles; ++j) x_next[j] = __ldg(x_rows[j] + (first + step + 1) * 4);
        }
        const uint32_t a0[4] = {lo[d].x, hi[d].x, lo[d].y, hi[d].y};
        const uint32_t a1[4] = {lo[d].z, hi[d].z, lo[d].w, hi[d].w};
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
          mma_bf16_16816(acc[j], a0, xv[j].x, xv[j].y);
          mma_bf16_16816(acc[j], a1, xv[j].z, xv[j].w);
          if (more) xv[j] = x_next[j];
        }
      }
    }
    if (base + kDepth < steps) load_batch(base + kDepth);
  }

  // acc[j]: c0, c1 row g (lo) tokens 8 j + 2 t, + 1; c2, c3 row g + 8 (hi, or up) the same.
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int token = 8 * j + 2 * t + c;
      if (token >= a.m) continue;
      if constexpr (kSilu) {
        if (stored_lo < n) {
          const float gate = acc[j][c], up = acc[j][2 + c];
          static_cast<bf16*>(a.y)[int64_t(token) * n + stored_lo] =
              __float2bfloat16_rn(gate / (1.0f + __expf(-gate)) * up);
        }
      } else {
        float* part = static_cast<float*>(a.y) + int64_t(blockIdx.y) * a.m * n + int64_t(token) * n;
        if (stored_lo < n) part[stored_lo] = acc[j][c];
        if (stored_hi < n) part[stored_hi] = acc[j][2 + c];
      }
    }
  }
}

// Steps of kStepK per split for an (n, k) layer: splits enough that the row tiles times the
// splits reach form.blocks_per_sm blocks per SM, each split at least one batch of steps.
int steps_per_split(int n, int k, bool silu, const SkinnyForm& form) {
  const int steps = k / kStepK;
  if (silu) return steps;
  const int tiles = (n + kBlockRows - 1) / kBlockRows;
  const int wanted = (form.blocks_per_sm * device_sms() + tiles - 1) / tiles;
  const int splits = std::clamp(wanted, 1, std::max(1, steps / form.steps_per_batch));
  return (steps + splits - 1) / splits;
}

template <bool kSilu, int kDepth>
void launch_depth(int m, dim3 grid, cudaStream_t stream, bool overlap, const SkinnyArgs& args) {
  const int tiles = (m + 7) / 8;  // of 8 tokens
  auto kernel = tiles == 1   ? skinny_gemm_kernel<1, kSilu, kDepth>
                : tiles == 2 ? skinny_gemm_kernel<2, kSilu, kDepth>
                : tiles == 3 ? skinny_gemm_kernel<3, kSilu, kDepth>
                             : skinny_gemm_kernel<4, kSilu, kDepth>;
  launch_kernel(kernel, grid, dim3(kThreads), 0, stream, overlap, args);
}

// Launches the kernel; returns its k splits (the partials written).
template <bool kSilu>
int launch(const char* name, const bf16* x, const bf16* w, void* y, int m, int n, int k,
           cudaStream_t stream, bool overlap, const SkinnyForm& form) {
  auto misaligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 != 0; };
  if (!skinny_gemm_supports(m, k) || n < 1 || misaligned(x) || misaligned(w) || misaligned(y)) {
    throw_cuda_failure(name, __FILE__, __LINE__,
                       "needs 1..32 tokens, k a multiple of 32 and 16-byte aligned pointers");
  }
  if ((form.steps_per_batch != 4 && form.steps_per_batch != 8) || form.blocks_per_sm < 1 ||
      form.blocks_per_sm > 4) {
    throw_cuda_failure(name, __FILE__, __LINE__,
                       "SkinnyForm: steps_per_batch 4 or 8, blocks_per_sm 1 to 4");
  }
  const int per_split = steps_per_split(n, k, kSilu, form);
  const int rows_per_tile = kSilu ? kBlockRows / 2 : kBlockRows;
  const dim3 grid(unsigned((n + rows_per_tile - 1) / rows_per_tile),
                  unsigned((k / kStepK + per_split - 1) / per_split));
  const SkinnyArgs args{x, w, y, m, n, k, per_split};
  if (form.steps_per_batch == 4) {
    launch_depth<kSilu, 4>(m, grid, stream, overlap, args);
  } else {
    launch_depth<kSilu, 8>(m, grid, stream, overlap, args);
  }
  GPUFRAC_LAUNCH_CHECK();
  return int(grid.y);
}

}  // namespace

bool skinny_gemm_supports(int m, int k) {
  return m >= 1 && m <= kSkinnyMaxTokens && k >= kStepK && k % kStepK == 0;
}

int skinny_gemm_splits(int n, int k, const SkinnyForm& form) {
  if (!skinny_gemm_supports(1, k)) return 1;
  const int per_split = steps_per_split(n, k, false, form);
  return (k / kStepK + per_split - 1) / per_split;
}

GemmOutput launch_skinny_gemm(const bf16* x, const bf16* w, float* partials, int m, int n, int k,
                              cudaStream_t stream, bool overlap, const SkinnyForm& form) {
  const int splits =
      launch<false>("launch_skinny_gemm", x, w, partials, m, n, k, stream, overlap, form);
  return {partials, false, splits, int64_t(m) * n};
}

void launch_skinny_gemm_silu_mul(const bf16* x, const bf16* w_gate_up, bf16* y, int m, int n, int k,
                                 cudaStream_t stream, bool overlap, const SkinnyForm& form) {
  launch<true>("launch_skinny_gemm_silu_mul", x, w_gate_up, y, m, n, k, stream, overlap, form);
}

}  // namespace gpufrac::engine
