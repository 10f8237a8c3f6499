// The tensor-core form of the GEMV (gemv.h) for kGemvSimtMaxTokens < m <= kGemvMaxTokens tokens:
// y[m][n] = x[m][k] W[n][k]^T with the weight rows as the MMA's M (16 per warp, 128 per tile)
// and the tokens, padded to 8 * kTokenTiles, as its N.
//
// Work: a tile's k range goes in steps of kStepK; the tiles x steps iterations, in tile order,
// are dealt to a grid of the blocks resident at once (one per SM) in equal contiguous shares, so
// every block streams the same bytes and a tile may be summed by two or more blocks. A block
// streams its iterations through a kStages-deep cp.async ring in shared memory (the weights'
// 32 KB and x's few KB of the same k range per stage), the first stages' weights issued before
// it waits for the previous kernel (kernel_launch.cuh). Where a tile ends inside the block, its
// sums go through shared memory to the epilogue (store, add into the residual, a GemvNorm left or
// taken, SiLU * mul); where a tile is shared, each block writes its part into the GemvScratch
// (slot 2b for a block's first tile, 2b + 1 for its last), counts its arrival in the count of
// the tile's last block (unique to the tile), and the last to arrive adds the parts in block
// order and runs the epilogue.
//
// Shared-memory rows are 256 bytes (16 chunks of 16 bytes); chunk c of row r sits at chunk
// c ^ 4 (r & 1), so the eight lanes of each quarter-warp reading rows g and g + 1 hit distinct
// banks. The MMA's k order is permuted inside each 32-wide k group: lane t4 reads chunk 4 q + t4
// (elements 8 (4 q + t4) .. + 7) of its weight rows and of its token rows and feeds the first
// four to one k step and the last four to the next; weights and x share the permutation, so the
// sums are the same products in another order.
#include <algorithm>
#include <atomic>

#include "engine/cuda/async_copy_mma.cuh"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device_math.cuh"
#include "engine/cuda/gemv_internal.cuh"
#include "engine/cuda/kernel_launch.cuh"

namespace gpufrac::engine {

namespace {

constexpr int kThreads = 256;              // 8 warps
constexpr int kWarps = kThreads / 32;
constexpr int kTileRows = 16 * kWarps;     // weight rows per tile: 16 per warp
constexpr int kStepK = 128;                // k per pipeline stage: 256 bytes of each row
constexpr int kChunks = kStepK / 8;        // 16-byte chunks per row and stage
constexpr int kStages = 4;
constexpr int kSumStride = kTileRows + 4;  // floats per token of a tile's sums: conflict-free
constexpr int kMaxBlocksPerSm = 2;         // what GemvScratch holds room for
constexpr int kSlotFloats = kGemvMaxTokens * kTileRows;

struct MmaArgs {
  GemvArgs g;
  int m;
  int steps_per_tile;   // ceil(k / kStepK)
  int total_steps;      // tiles x steps_per_tile
  int steps_per_block;  // the equal share (the last block's may be shorter)
  float* partials;      // GemvScratch
  unsigned* counters;
};

// Shared memory of the kernel for 8 * kTokenTiles token rows: the ring (weights, then x, per
// stage), one tile's sums, the tokens' norm scales and the sums of squares a GemvNorm leaves.
template <int kTokenTiles>
struct Layout {
  static constexpr int kTokens = 8 * kTokenTiles;
  static constexpr int kWeightChunks = kTileRows * kChunks;  // per stage
  static constexpr int kTokenChunks = kTokens * kChunks;
  static constexpr int kRingBytes = kStages * (kWeightChunks + kTokenChunks) * 16;
  static constexpr int kSumFloats = kTokens * kSumStride;
  static constexpr int kBytes = kRingBytes + (kSumFloats + kGemvMaxTokens * (1 + 4)) * 4;
};

__device__ __forceinline__ int swizzled(int row, int chunk) {
  return row * kChunks + (chunk ^ ((row & 1) << 2));
}

// Weight row behind row r of `tile`, or -1 past n. SiLU: the tile's first half are gate rows
// f0.., its second the up rows of the same outputs.
template <bool kSilu>
__device__ __forceinline__ int64_t weight_row(const GemvArgs& a, int tile, int r) {
  constexpr int kOutputs = kSilu ? kTileRows / 2 : kTileRows;
  const int f = tile * kOutputs + (kSilu ? r % kOutputs : r);
  if (f >= a.n) return -1;
  return kSilu && r >= kOutputs ? int64_t(f) + a.n : int64_t(f);
}

template <bool kSilu>
__device__ __forceinline__ void load_weights(const GemvArgs& a, int tile, int step, uint4* stage) {
  const int k0 = step * kStepK;
#pragma unroll
  for (int u = 0; u < kTileRows * kChunks / kThreads; ++u) {
    const int i = threadIdx.x + u * kThreads;
    const int r = i / kChunks, c = i % kChunks;
    const int64_t row = weight_row<kSilu>(a, tile, r);
    const int kk = k0 + c * 8;
    const bool valid = row >= 0 && kk < a.k;
    cp_async_16_or_zero(stage + swizzled(r, c), valid ? a.w + row * a.k + kk : a.w,
                        valid ? 16 : 0);
  }
}

template <int kTokenTiles>
__device__ __forceinline__ void load_tokens(const GemvArgs& a, int m, int step, uint4* stage) {
  constexpr int kCount = Layout<kTokenTiles>::kTokenChunks;
  const int k0 = step * kStepK;
#pragma unroll
  for (int u = 0; u < (kCount + kThreads - 1) / kThreads; ++u) {
    const int i = threadIdx.x + u * kThreads;
    if (kCount % kThreads != 0 && i >= kCount) break;
    const int token = i / kChunks, c = i % kChunks;
    const int kk = k0 + c * 8;
    const bool valid = token < m && kk < a.k;
    cp_async_16_or_zero(stage + swizzled(token, c), valid ? a.x + int64_t(token) * a.k + kk : a.x,
                        valid ? 16 : 0);
  }
}

// acc[j] += this warp's 16 weight rows x token rows 8 j .. 8 j + 7 over one stage.
template <int kTokenTiles>
__device__ __forceinline__ void multiply(const uint4* weights, const uint4* tokens,
                                         float acc[kTokenTiles][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
  const int r0 = (threadIdx.x >> 5) * 16 + g;
#pragma unroll
  for (int q = 0; q < kChunks / 4; ++q) {
    const int c = 4 * q + t4;
    const uint4 lo = weights[swizzled(r0, c)], hi = weights[swizzled(r0 + 8, c)];
    const uint32_t a0[4] = {lo.x, hi.x, lo.y, hi.y}, a1[4] = {lo.z, hi.z, lo.w, hi.w};
#pragma unroll
    for (int j = 0; j < kTokenTiles; ++j) {
      const uint4 b = tokens[swizzled(8 * j + g, c)];
      mma_bf16_16816(acc[j], a0, b.x, b.y);
      mma_bf16_16816(acc[j], a1, b.z, b.w);
    }
  }
}

// The epilogue of one tile whose whole sums are in `sums` ([token][kSumStride]).
template <bool kSilu>
__device__ void finish_tile(const GemvArgs& a, int m, int tile, const float* sums,
                            const float* scale, float* squares) {
  constexpr int kOutputs = kSilu ? kTileRows / 2 : kTileRows;
  constexpr int kTokensPerPass = kThreads / kOutputs;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int o = tid % kOutputs, f = tile * kOutputs + o;
  for (int t0 = 0; t0 < m; t0 += kTokensPerPass) {
    const int token = t0 + tid / kOutputs;  // the same for the whole warp
    const bool live = token < m && f < a.n;
    const int64_t at = int64_t(token) * a.n + f;
    if constexpr (kSilu) {
      if (live) {
        const float gate = sums[token * kSumStride + o] * scale[token];
        const float up = sums[token * kSumStride + kOutputs + o] * scale[token];
        static_cast<bf16*>(a.y)[at] = __float2bfloat16_rn(gate / (1.0f + __expf(-gate)) * up);
      }
    } else {
      // The square of the updated residual, for a GemvNorm left.
      float square =
          live ? store_output(a, at, f, sums[token * kSumStride + o] * scale[token]) : 0.0f;
      if (a.leaves.weight) {
        square = warp_sum(square);
        if (lane == 0 && token < m) squares[token * 4 + warp % 4] = square;
      }
    }
  }
  if (!kSilu && a.leaves.weight) {
    __syncthreads();
    if (tid < m) {
      const float* s = squares + tid * 4;
      a.leaves.sums[tid * a.leaves.parts + tile] = ((s[0] + s[1]) + s[2]) + s[3];
    }
  }
}

template <int kTokenTiles, bool kSilu>
__global__ void __launch_bounds__(kThreads, 1) gemv_mma_kernel(MmaArgs a) {
  using L = Layout<kTokenTiles>;
  extern __shared__ __align__(16) unsigned char shared[];
  uint4* weight_ring = reinterpret_cast<uint4*>(shared);
  uint4* token_ring = weight_ring + kStages * L::kWeightChunks;
  float* sums = reinterpret_cast<float*>(shared + L::kRingBytes);
  float* scale = sums + L::kSumFloats;      // [kGemvMaxTokens]
  float* squares = scale + kGemvMaxTokens;  // [kGemvMaxTokens][4]
  __shared__ int finishes;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int per_tile = a.steps_per_tile;
  const int first = blockIdx.x * a.steps_per_block;
  const int count = min(a.steps_per_block, a.total_steps - first);
  auto weights_at = [&](int i) { return weight_ring + (i % kStages) * L::kWeightChunks; };
  auto tokens_at = [&](int i) { return token_ring + (i % kStages) * L::kTokenChunks; };

  for (int i = 0; i < kStages - 1 && i < count; ++i) {  // weights only: legal before the wait
    load_weights<kSilu>(a.g, (first + i) / per_tile, (first + i) % per_tile, weights_at(i));
  }
  wait_for_previous_grid();
  allow_next_grid_launch();
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < count) load_tokens<kTokenTiles>(a.g, a.m, (first + i) % per_tile, tokens_at(i));
    cp_async_commit();
  }
  for (int token = warp; token < a.m; token += kWarps) {
    float sum = 0.0f;
    if (a.g.take_sums) {
      for (int b = lane; b < a.g.take_parts; b += 32) sum += a.g.take_sums[token * a.g.take_parts + b];
      sum = warp_sum(sum);
    }
    if (lane == 0) scale[token] = a.g.take_sums ? rsqrtf(sum / float(a.g.k) + a.g.take_eps) : 1.0f;
  }

  float acc[kTokenTiles][4] = {};
  int tile = first / per_tile, step = first % per_tile;
  bool tile_began_here = step == 0;
  const int first_tile = tile;
  for (int i = 0; i < count; ++i) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage i arrived for every thread; stage i - 1 is free
    const int ahead = i + kStages - 1;
    if (ahead < count) {
      const int it = first + ahead;
      load_weights<kSilu>(a.g, it / per_tile, it % per_tile, weights_at(ahead));
      load_tokens<kTokenTiles>(a.g, a.m, it % per_tile, tokens_at(ahead));
    }
    cp_async_commit();
    multiply<kTokenTiles>(weights_at(i), tokens_at(i), acc);
    const bool tile_ends = step == per_tile - 1;
    if (!tile_ends && i + 1 < count) {
      ++step;
      continue;
    }
    // This block's part of `tile` is done: its sums into shared memory, [token][row].
    const int g = lane >> 2, t4 = lane & 3, r0 = warp * 16 + g;
#pragma unroll
    for (int j = 0; j < kTokenTiles; ++j) {
      const int token = 8 * j + 2 * t4;
      sums[token * kSumStride + r0] = acc[j][0];
      sums[(token + 1) * kSumStride + r0] = acc[j][1];
      sums[token * kSumStride + r0 + 8] = acc[j][2];
      sums[(token + 1) * kSumStride + r0 + 8] = acc[j][3];
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;
    }
    __syncthreads();
    if (tile_began_here && tile_ends) {
      finish_tile<kSilu>(a.g, a.m, tile, sums, scale, squares);
    } else {
      float* slot = a.partials + int64_t(2 * blockIdx.x + (tile != first_tile)) * kSlotFloats;
      for (int e = tid; e < L::kTokens * kTileRows; e += kThreads) {
        slot[e] = sums[(e / kTileRows) * kSumStride + e % kTileRows];
      }
      __threadfence();
      __syncthreads();
      const int lo = tile * per_tile / a.steps_per_block;
      const int hi = ((tile + 1) * per_tile - 1) / a.steps_per_block;
      if (tid == 0) finishes = atomicAdd(a.counters + hi, 1u) == unsigned(hi - lo);
      __syncthreads();
      if (finishes) {
        __threadfence();
        for (int e = tid; e < L::kTokens * kTileRows; e += kThreads) {
          float total = 0.0f;
          for (int b = lo; b <= hi; ++b) {
            const int its_first_tile = b * a.steps_per_block / per_tile;
            total += __ldcg(a.partials + int64_t(2 * b + (tile != its_first_tile)) * kSlotFloats + e);
          }
          sums[(e / kTileRows) * kSumStride + e % kTileRows] = total;
        }
        if (tid == 0) a.counters[hi] = 0;
        __syncthreads();
        finish_tile<kSilu>(a.g, a.m, tile, sums, scale, squares);
      }
    }
    ++tile;
    step = 0;
    tile_began_here = true;
  }
  cp_async_wait<0>();
}

// Blocks of gemv_mma_kernel<kTokenTiles, kSilu> resident per SM on the current device, after
// allowing it its shared memory (once per device).
template <int kTokenTiles, bool kSilu>
int mma_blocks_per_sm() {
  static std::atomic<int> remembered[64];
  const int blocks = once_per_device(remembered, [](int) {
    auto kernel = gemv_mma_kernel<kTokenTiles, kSilu>;
    constexpr int kBytes = Layout<kTokenTiles>::kBytes;
    GPUFRAC_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes));
    int per_sm = 0;
    GPUFRAC_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, kBytes));
    if (per_sm == 0) {
      throw_cuda_failure("launch_gemv", __FILE__, __LINE__,
                         "the tensor-core GEMV's shared memory does not fit an SM");
    }
    return per_sm;
  });
  return std::min(blocks, kMaxBlocksPerSm);
}

template <int kTokenTiles, bool kSilu>
void launch_tiles(const GemvArgs& g, int m, const GemvScratch& scratch, cudaStream_t stream,
                  bool overlap) {
  constexpr int kOutputs = kSilu ? kTileRows / 2 : kTileRows;
  const int slots = std::min(mma_blocks_per_sm<kTokenTiles, kSilu>() * device_sms(),
                             scratch.blocks());
  MmaArgs a{};
  a.g = g;
  a.m = m;
  a.steps_per_tile = (g.k + kStepK - 1) / kStepK;
  a.total_steps = (g.n + kOutputs - 1) / kOutputs * a.steps_per_tile;
  a.steps_per_block = (a.total_steps + slots - 1) / slots;
  a.partials = scratch.partials();
  a.counters = scratch.counters();
  const int grid = (a.total_steps + a.steps_per_block - 1) / a.steps_per_block;
  launch_kernel(gemv_mma_kernel<kTokenTiles, kSilu>, dim3(unsigned(grid)), dim3(kThreads),
                size_t(Layout<kTokenTiles>::kBytes), stream, overlap, a);
}

template <bool kSilu>
void launch_for(const GemvArgs& a, int m, const GemvScratch& scratch, cudaStream_t stream,
                bool overlap) {
  static_assert(kGemvMaxTokens <= 32, "four token tiles at most");
  switch ((m + 7) / 8) {
    case 1: launch_tiles<1, kSilu>(a, m, scratch, stream, overlap); break;
    case 2: launch_tiles<2, kSilu>(a, m, scratch, stream, overlap); break;
    case 3: launch_tiles<3, kSilu>(a, m, scratch, stream, overlap); break;
    default: launch_tiles<4, kSilu>(a, m, scratch, stream, overlap); break;
  }
}

}  // namespace

GemvScratch::GemvScratch()
    : blocks_(kMaxBlocksPerSm * device_sms()),
      partials_(uint64_t(2) * uint64_t(blocks_) * kSlotFloats * sizeof(float),
                "the tensor-core GEMV's partial sums"),
      counters_(uint64_t(blocks_) * sizeof(unsigned), "the tensor-core GEMV's arrival counts") {
  GPUFRAC_CUDA_CHECK(cudaMemset(counters_.data(), 0, counters_.bytes()));
}

int gemv_mma_tile_outputs() { return kTileRows; }

void launch_gemv_mma(const GemvArgs& a, bool silu, int m, const GemvScratch& scratch,
                     cudaStream_t stream, bool overlap) {
  if (silu) {
    launch_for<true>(a, m, scratch, stream, overlap);
  } else {
    launch_for<false>(a, m, scratch, stream, overlap);
  }
}

}  // namespace gpufrac::engine
