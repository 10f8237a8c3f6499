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

constexpr int kStageSteps = 2;           // through shared memory: steps of 32 k per stage
constexpr int kStages = 4;               // stages in the ring (kStages - 1 in flight)
constexpr int kStageChunks = kStageSteps * kStepK / 8;  // 16-byte chunks of a row in a stage

struct SkinnyArgs {
  const bf16* x;
  const bf16* w;
  void* y;
  int m, n, k;
  int steps_per_split;
};

// Grid (row tiles, splits). Lane = 4 g + t. Warp `warp` of the block holds A rows g and g + 8
// ("lo" and "hi"): plain, weight rows tile * 64 + 16 warp + {g, g + 8}; SiLU, gate row f and up
// row n + f of feature f = tile * 32 + 8 warp + g, so c0/c1 (gate) and c2/c3 (up) of a token
// meet in one thread. A step of 32 k: the lane's 16 bytes of each of its rows and of token
// 8 j + g (tile j of kTiles) are k = 8 t .. 8 t + 7 of the step; the first MMA takes pairs 0 and
// 1 of them as the fragment's k = 2t, 2t + 1 and 2t + 8, 2t + 9, the second MMA pairs 2 and 3 (A
// and B permuted alike, so the sum is the dot product). Rows past n and tokens past m are
// clamped to the last (loads stay in bounds) and not stored.

// The weight row (of w) behind row `r` (0..63) of the block's tile: lo rows of warp r / 16 at
// r % 16 < 8, its hi rows past them.
template <bool kSilu>
__device__ __forceinline__ int64_t tile_row(int r, int n) {
  const int warp = r / 16, within = r % 16;
  if constexpr (kSilu) {
    const int feature = min(int(blockIdx.x) * (kBlockRows / 2) + warp * 8 + (within & 7), n - 1);
    return within < 8 ? feature : int64_t(n) + feature;
  } else {
    return min(int(blockIdx.x) * kBlockRows + r, n - 1);
  }
}

// x rows of the lane's tokens 8 j + g (clamped to m - 1), at the first step of this split.
template <int kTiles>
__device__ __forceinline__ void x_rows_of_lane(const SkinnyArgs& a, int first_step,
                                               const uint4* (&rows)[kTiles]) {
  const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    rows[j] = reinterpret_cast<const uint4*>(a.x) + int64_t(min(8 * j + g, a.m - 1)) * (a.k / 8) +
              first_step * 4 + t;
  }
}

// One step: acc[j] += (lo and hi rows' 32 k) x (token tile j's 32 k), both MMAs.
template <int kTiles>
__device__ __forceinline__ void mma_step(float (&acc)[kTiles][4], const uint4& lo, const uint4& hi,
                                         const uint4 (&xv)[kTiles]) {
  const uint32_t a0[4] = {lo.x, hi.x, lo.y, hi.y};
  const uint32_t a1[4] = {lo.z, hi.z, lo.w, hi.w};
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    mma_bf16_16816(acc[j], a0, xv[j].x, xv[j].y);
    mma_bf16_16816(acc[j], a1, xv[j].z, xv[j].w);
  }
}

// Loads x for step `step` (relative to the split) into xv.
template <int kTiles>
__device__ __forceinline__ void load_x(const uint4* const (&x_rows)[kTiles], int step,
                                       uint4 (&xv)[kTiles]) {
#pragma unroll
  for (int j = 0; j < kTiles; ++j) xv[j] = __ldg(x_rows[j] + step * 4);
}

// acc[j]: c0, c1 row lo, tokens 8 j + 2 t and + 1; c2, c3 row hi (or up), the same tokens.
// Plain: fp32 partial blockIdx.y; SiLU: silu(gate) * up in bf16.
template <int kTiles, bool kSilu>
__device__ __forceinline__ void store_outputs(const SkinnyArgs& a, const float (&acc)[kTiles][4]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int n = a.n;
  const int row_lo = kSilu ? int(blockIdx.x) * (kBlockRows / 2) + warp * 8 + g
                           : int(blockIdx.x) * kBlockRows + warp * 16 + g;
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int token = 8 * j + 2 * t + c;
      if (token >= a.m) continue;
      if constexpr (kSilu) {
        if (row_lo < n) {
          const float gate = acc[j][c], up = acc[j][2 + c];
          static_cast<bf16*>(a.y)[int64_t(token) * n + row_lo] =
              __float2bfloat16_rn(gate / (1.0f + __expf(-gate)) * up);
        }
      } else {
        float* part = static_cast<float*>(a.y) + int64_t(blockIdx.y) * a.m * n + int64_t(token) * n;
        if (row_lo < n) part[row_lo] = acc[j][c];
        if (row_lo + 8 < n) part[row_lo + 8] = acc[j][2 + c];
      }
    }
  }
}

// Weights straight into registers, in batches of kDepth steps (SkinnyForm::steps_per_batch): a
// batch's loads are all issued, then all consumed, then the next batch's issued. (Reloading each
// step's registers as soon as they are consumed kept about one step in flight, not kDepth:
// NOTES.md, version 16.) x runs one step ahead.
template <int kTiles, bool kSilu, int kDepth>
__global__ void __launch_bounds__(kThreads) skinny_gemm_kernel(SkinnyArgs a) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int first = blockIdx.y * a.steps_per_split;
  const int steps = min(a.steps_per_split, a.k / kStepK - first);
  const uint4* w_lo =
      reinterpret_cast<const uint4*>(a.w + tile_row<kSilu>(warp * 16 + g, a.n) * a.k) +
      first * 4 + t;
  const uint4* w_hi =
      reinterpret_cast<const uint4*>(a.w + tile_row<kSilu>(warp * 16 + g + 8, a.n) * a.k) +
      first * 4 + t;
  uint4 lo[kDepth], hi[kDepth];
  auto load_batch = [&](int base) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      if (base + d < steps) {
        lo[d] = load_streaming(w_lo + (base + d) * 4);
        hi[d] = load_streaming(w_hi + (base + d) * 4);
      }
    }
  };
  load_batch(0);
  wait_for_previous_grid();
  allow_next_grid_launch();

  const uint4* x_rows[kTiles];
  x_rows_of_lane<kTiles>(a, first, x_rows);
  uint4 xv[kTiles], x_next[kTiles];
  load_x<kTiles>(x_rows, 0, xv);
  float acc[kTiles][4] = {};
  for (int base = 0; base < steps; base += kDepth) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      const int step = base + d;
      if (step < steps) {
        const bool more = step + 1 < steps;
        if (more) load_x<kTiles>(x_rows, step + 1, x_next);
        mma_step<kTiles>(acc, lo[d], hi[d], xv);
        if (more) {
#pragma unroll
          for (int j = 0; j < kTiles; ++j) xv[j] = x_next[j];
        }
      }
    }
    if (base + kDepth < steps) load_batch(base + kDepth);
  }
  store_outputs<kTiles, kSilu>(a, acc);
}

// Weights through a ring of kStages shared-memory stages (kStageSteps steps of the block's 64
// rows each) filled by cp.async, kStages - 1 stages in flight: each 8 threads copy 128
// contiguous bytes of a row per stage, and no registers hold weights in flight. Row r's 16-byte
// chunk c sits at chunk c ^ 4 (r & 1) of its row in the stage, so the 8 lanes of a quarter warp
// (rows 2i and 2i + 1, chunks 4s .. 4s + 3) read distinct banks. x runs one step ahead.
template <int kTiles, bool kSilu>
__global__ void __launch_bounds__(kThreads) skinny_gemm_staged_kernel(SkinnyArgs a) {
  __shared__ uint4 stages[kStages][kBlockRows][kStageChunks];
  constexpr int kCopiesPerThread = kBlockRows * kStageChunks / kThreads;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int first = blockIdx.y * a.steps_per_split;
  const int steps = min(a.steps_per_split, a.k / kStepK - first);
  const int stage_count = (steps + kStageSteps - 1) / kStageSteps;

  // This thread's copies: chunk c of row r of every stage, c = i % kStageChunks.
  const uint4* copy_from[kCopiesPerThread];
  uint32_t copy_to[kCopiesPerThread];  // in stage 0
#pragma unroll
  for (int i = 0; i < kCopiesPerThread; ++i) {
    const int index = int(threadIdx.x) + i * kThreads;
    const int r = index / kStageChunks, c = index % kStageChunks;
    copy_from[i] = reinterpret_cast<const uint4*>(a.w + tile_row<kSilu>(r, a.n) * a.k) +
                   first * 4 + c;
    copy_to[i] = static_cast<uint32_t>(
        __cvta_generic_to_shared(&stages[0][r][c ^ ((r & 1) << 2)]));
  }
  auto copy_stage = [&](int stage) {
#pragma unroll
    for (int i = 0; i < kCopiesPerThread; ++i) {
      const int c = (int(threadIdx.x) + i * kThreads) % kStageChunks;
      if (stage * kStageSteps + c / 4 < steps) {
        cp_async_16(copy_to[i] + uint32_t((stage % kStages) * sizeof(stages[0])),
                    copy_from[i] + stage * kStageChunks);
      }
    }
  };
#pragma unroll
  for (int stage = 0; stage < kStages - 1; ++stage) {
    if (stage < stage_count) copy_stage(stage);
    cp_async_commit();
  }
  wait_for_previous_grid();
  allow_next_grid_launch();

  const uint4* x_rows[kTiles];
  x_rows_of_lane<kTiles>(a, first, x_rows);
  uint4 xv[kTiles], x_next[kTiles];
  load_x<kTiles>(x_rows, 0, xv);
  float acc[kTiles][4] = {};
  const int r_lo = warp * 16 + g, r_hi = r_lo + 8;
  for (int stage = 0; stage < stage_count; ++stage) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // the stage has landed for every thread; the one copied over is consumed
    if (stage + kStages - 1 < stage_count) copy_stage(stage + kStages - 1);
    cp_async_commit();
    const uint4(&tile)[kBlockRows][kStageChunks] = stages[stage % kStages];
#pragma unroll
    for (int s = 0; s < kStageSteps; ++s) {
      const int step = stage * kStageSteps + s;
      if (step < steps) {
        const uint4 lo = tile[r_lo][(4 * s + t) ^ ((r_lo & 1) << 2)];
        const uint4 hi = tile[r_hi][(4 * s + t) ^ ((r_hi & 1) << 2)];
        const bool more = step + 1 < steps;
        if (more) load_x<kTiles>(x_rows, step + 1, x_next);
        mma_step<kTiles>(acc, lo, hi, xv);
        if (more) {
#pragma unroll
          for (int j = 0; j < kTiles; ++j) xv[j] = x_next[j];
        }
      }
    }
  }
  store_outputs<kTiles, kSilu>(a, acc);
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

// The kernel of `form` for m tokens (tiles of 8).
template <bool kSilu>
void (*kernel_for(const SkinnyForm& form, int m))(SkinnyArgs) {
  const int tiles = (m + 7) / 8;
  if (form.through_shared) {
    return tiles == 1   ? skinny_gemm_staged_kernel<1, kSilu>
           : tiles == 2 ? skinny_gemm_staged_kernel<2, kSilu>
           : tiles == 3 ? skinny_gemm_staged_kernel<3, kSilu>
                        : skinny_gemm_staged_kernel<4, kSilu>;
  }
  if (form.steps_per_batch == 4) {
    return tiles == 1   ? skinny_gemm_kernel<1, kSilu, 4>
           : tiles == 2 ? skinny_gemm_kernel<2, kSilu, 4>
           : tiles == 3 ? skinny_gemm_kernel<3, kSilu, 4>
                        : skinny_gemm_kernel<4, kSilu, 4>;
  }
  return tiles == 1   ? skinny_gemm_kernel<1, kSilu, 8>
         : tiles == 2 ? skinny_gemm_kernel<2, kSilu, 8>
         : tiles == 3 ? skinny_gemm_kernel<3, kSilu, 8>
                      : skinny_gemm_kernel<4, kSilu, 8>;
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
  const bool steps_valid = form.through_shared
                               ? form.steps_per_batch == kStageSteps * (kStages - 1)
                               : form.steps_per_batch == 4 || form.steps_per_batch == 8;
  if (!steps_valid || form.blocks_per_sm < 1 || form.blocks_per_sm > 4) {
    throw_cuda_failure(name, __FILE__, __LINE__,
                       "SkinnyForm: steps_per_batch 4 or 8 (6 through shared memory), "
                       "blocks_per_sm 1 to 4");
  }
  const int per_split = steps_per_split(n, k, kSilu, form);
  const int rows_per_tile = kSilu ? kBlockRows / 2 : kBlockRows;
  const dim3 grid(unsigned((n + rows_per_tile - 1) / rows_per_tile),
                  unsigned((k / kStepK + per_split - 1) / per_split));
  const SkinnyArgs args{x, w, y, m, n, k, per_split};
  launch_kernel(kernel_for<kSilu>(form, m), grid, dim3(kThreads), 0, stream, overlap, args);
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
