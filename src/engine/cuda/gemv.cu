#include "engine/cuda/gemv.h"

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device_math.cuh"
#include "engine/cuda/kernel_launch.cuh"

namespace gpufrac::engine {

namespace {

constexpr int kThreads = 128;  // per block; all of them split the k dimension
constexpr int kUnroll = 4;     // 16-byte loads in flight per weight row per thread

// Streaming 16-byte load: read-only, not allocated in L1 (each weight is read once per step).
__device__ __forceinline__ uint4 load_streaming(const uint4* src) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(src));
  return r;
}

__device__ __forceinline__ float dot8(const uint4& a, const uint4& b) {
  const __nv_bfloat162* a2 = reinterpret_cast<const __nv_bfloat162*>(&a);
  const __nv_bfloat162* b2 = reinterpret_cast<const __nv_bfloat162*>(&b);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 fa = __bfloat1622float2(a2[i]), fb = __bfloat1622float2(b2[i]);
    sum = fmaf(fa.x, fb.x, sum);
    sum = fmaf(fa.y, fb.y, sum);
  }
  return sum;
}

// One block per kRows weight rows. Plain (kSilu false): rows f0..f0+kRows-1 give those outputs
// of n. SiLU (kSilu true, w = [gate; up] with n rows each): rows f0, f0+1 of gate and of up give
// outputs silu(gate) * up for f0, f0+1 (bf16). Thread t dots chunks t, t + 128, ... of each row
// with the same chunks of every x row (loaded once for all rows), kRows x kUnroll weight loads
// in flight; warps are summed through shared memory. The first batch of weight loads is issued
// before waiting for the previous kernel (kernel_launch.cuh), which wrote x.
template <int kM, bool kSilu, int kRows>
__global__ void __launch_bounds__(kThreads) gemv_kernel(const bf16* x, const bf16* w, void* y,
                                                        bool y_bf16, int n, int k) {
  static_assert(!kSilu || kRows % 2 == 0, "gate and up rows pair up");
  constexpr int kOutputs = kSilu ? kRows / 2 : kRows;
  __shared__ float partial[kThreads / 32][kRows][kM];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int f0 = blockIdx.x * kOutputs;
  const int chunks = k / 8;
  const uint4* x_rows = reinterpret_cast<const uint4*>(x);
  const uint4* w_row[kRows];
  bool row_ok[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    int f = f0 + (kSilu ? r % kOutputs : r);
    row_ok[r] = f < n;
    int64_t row = kSilu && r >= kOutputs ? int64_t(f) + n : int64_t(f);
    w_row[r] = reinterpret_cast<const uint4*>(w + (row_ok[r] ? row : 0) * k);
  }
  float acc[kRows][kM];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int m = 0; m < kM; ++m) acc[r][m] = 0.0f;
  }
  constexpr int kStride = kThreads * kUnroll;  // chunks per row one pass of the block covers
  uint4 wv[kRows][kUnroll];
  auto load_weights = [&](int c0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + u * kThreads;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        wv[r][u] = c < chunks && row_ok[r] ? load_streaming(w_row[r] + c) : make_uint4(0, 0, 0, 0);
      }
    }
  };
  load_weights(tid);  // weights only: legal before the previous kernel has finished
  wait_for_previous_grid();
  allow_next_grid_launch();
  for (int c0 = tid; c0 < chunks; c0 += kStride) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + u * kThreads;
      if (c < chunks) {
#pragma unroll
        for (int m = 0; m < kM; ++m) {
          const uint4 xv = __ldg(x_rows + int64_t(m) * chunks + c);
#pragma unroll
          for (int r = 0; r < kRows; ++r) acc[r][m] += dot8(wv[r][u], xv);
        }
      }
    }
    if (c0 + kStride < chunks) load_weights(c0 + kStride);
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int m = 0; m < kM; ++m) {
      float v = warp_sum(acc[r][m]);
      if (lane == 0) partial[warp][r][m] = v;
    }
  }
  __syncthreads();
  if (tid >= kOutputs * kM) return;
  const int o = tid / kM, m = tid % kM;
  const int f = f0 + o;
  if (f >= n) return;
  auto total = [&](int r) {
    float s = 0.0f;
#pragma unroll
    for (int wi = 0; wi < kThreads / 32; ++wi) s += partial[wi][r][m];
    return s;
  };
  const int64_t at = int64_t(m) * n + f;
  if constexpr (kSilu) {
    const float gate = total(o), up = total(o + kOutputs);
    static_cast<bf16*>(y)[at] = __float2bfloat16_rn(gate / (1.0f + __expf(-gate)) * up);
  } else {
    const float v = total(o);
    if (y_bf16) {
      static_cast<bf16*>(y)[at] = __float2bfloat16_rn(v);
    } else {
      static_cast<float*>(y)[at] = v;
    }
  }
}

template <int kM, bool kSilu, int kRows>
void launch_rows(const bf16* x, const bf16* w, void* y, bool y_bf16, int n, int k,
                 cudaStream_t stream, bool overlap) {
  constexpr int kOutputs = kSilu ? kRows / 2 : kRows;
  launch_kernel(gemv_kernel<kM, kSilu, kRows>, dim3((n + kOutputs - 1) / kOutputs),
                dim3(kThreads), 0, stream, overlap, x, w, y, y_bf16, n, k);
}

// Blocks of gemv_kernel<kM, kSilu, kRows> resident at once per SM.
template <int kM, bool kSilu, int kRows>
int blocks_per_sm() {
  static const int blocks = [] {
    int per_sm = 0;
    GPUFRAC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, gemv_kernel<kM, kSilu, kRows>, kThreads, 0));
    return per_sm;
  }();
  return blocks;
}

// The share of its last wave of resident blocks a grid of `blocks` fills (1: whole waves).
double last_wave_fill(int64_t blocks, int64_t resident) {
  const int64_t waves = (blocks + resident - 1) / resident;
  return double(blocks) / double(waves * resident);
}

// Four rows per block, or five where four leave the last wave of resident blocks much emptier
// (n = 2560 on 132 SMs: 640 blocks of four rows are 1.2 waves of 528; 512 of five are one wave).
// Only one token: with more, five rows need more registers and fewer blocks fit. The fused SiLU
// form keeps four (gate and up rows pair up).
template <int kM, bool kSilu>
void launch_m(const bf16* x, const bf16* w, void* y, bool y_bf16, int n, int k,
              cudaStream_t stream, bool overlap) {
  if constexpr (kM == 1 && !kSilu) {
    int device = 0, sms = 0;
    GPUFRAC_CUDA_CHECK(cudaGetDevice(&device));
    GPUFRAC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const double fill4 = last_wave_fill((n + 3) / 4, int64_t(blocks_per_sm<kM, false, 4>()) * sms);
    const double fill5 = last_wave_fill((n + 4) / 5, int64_t(blocks_per_sm<kM, false, 5>()) * sms);
    if (fill5 > fill4 + 0.1) {
      launch_rows<kM, false, 5>(x, w, y, y_bf16, n, k, stream, overlap);
      return;
    }
  }
  launch_rows<kM, kSilu, 4>(x, w, y, y_bf16, n, k, stream, overlap);
}

// ---- Tensor-core form: 5 to kGemvMaxTokens tokens --------------------------------------------
constexpr int kMmaRows = 16;     // weight rows per block: the MMA's m dimension
constexpr int kTilePieces = 32;  // 16-byte pieces of each row per shared-memory tile (512 bytes)
constexpr int kStages = 4;       // tiles in flight per block
// Row stride of a tile in shared memory, in 16-byte pieces: 64 bytes of pad put rows g and g + 1
// on opposite halves of the banks (conflict-free 16-byte reads of two rows by 8 lanes).
constexpr int kTileStride = kTilePieces + 4;

__device__ __forceinline__ void cp_async_16(void* shared_dst, const void* src, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(shared_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));  // src-size 0: zero-filled
}

// One block per 16 weight rows (plain: outputs f0..f0+15; SiLU: gate rows f0..f0+7 as MMA rows
// 0-7 and the same up rows as 8-15, outputs silu(gate) * up for f0..f0+7), kTiles MMA column
// tiles of 8 tokens. The rows stream through a ring of kStages shared-memory tiles of 512 bytes
// per row (cp.async, each warp copying whole 512-byte row spans). The k dimension is summed, so
// its order inside a 32-element group is free: lane (g, t4) reads the 16-byte piece t4 of a
// group from rows g and g + 8 and the same piece of token g's x row (through L1), and the
// piece's words 0-1 and 2-3 are two m16n8k16 k-steps (a[0], a[2] of row g; a[1], a[3] of row
// g + 8; b0, b1 of token g: the same physical k in each). Warp w takes groups 2w and 2w + 1 of
// every tile; the warps are summed in shared memory at the end. The first tiles' copies are
// issued before waiting for the previous kernel (kernel_launch.cuh), which wrote x.
template <int kTiles, bool kSilu>
__global__ void __launch_bounds__(kThreads) gemv_mma_kernel(const bf16* x, const bf16* w, void* y,
                                                            bool y_bf16, int m, int n, int k) {
  constexpr int kWarps = kThreads / 32;
  constexpr int kOutputs = kSilu ? kMmaRows / 2 : kMmaRows;
  constexpr int kTokens = kTiles * 8;
  static_assert(kTilePieces == 8 * kWarps, "two 4-piece groups of each tile per warp");
  __shared__ __align__(16) uint4 tiles[kStages][kMmaRows][kTileStride];
  __shared__ float partial[kWarps][kMmaRows][kTokens + 1];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int f0 = blockIdx.x * kOutputs;
  const int pieces = k / 8;
  const int num_tiles = (pieces + kTilePieces - 1) / kTilePieces;
  // The rows this thread copies: warp w copies rows w, w + 4, w + 8, w + 12, lane = piece.
  const uint4* copy_row[kMmaRows / kWarps];
  bool copy_ok[kMmaRows / kWarps];
#pragma unroll
  for (int i = 0; i < kMmaRows / kWarps; ++i) {
    const int r = warp + kWarps * i;
    const int f = f0 + (kSilu ? r % kOutputs : r);
    copy_ok[i] = f < n;
    const int64_t row = kSilu && r >= kOutputs ? int64_t(f) + n : int64_t(f);
    copy_row[i] = reinterpret_cast<const uint4*>(w + (copy_ok[i] ? row : 0) * k);
  }
  auto copy_tile = [&](int tile) {
    if (tile < num_tiles) {
      const int c = tile * kTilePieces + lane;
      uint4(*stage)[kTileStride] = tiles[tile % kStages];
#pragma unroll
      for (int i = 0; i < kMmaRows / kWarps; ++i) {
        const bool valid = copy_ok[i] && c < pieces;
        cp_async_16(&stage[warp + kWarps * i][lane], valid ? copy_row[i] + c : copy_row[i],
                    valid);
      }
    }
    cp_async_commit();  // an empty group past the last tile keeps the wait counts uniform
  };
#pragma unroll
  for (int t = 0; t < kStages - 1; ++t) copy_tile(t);  // weights only: legal before the wait
  wait_for_previous_grid();
  allow_next_grid_launch();

  const uint4* x_rows = reinterpret_cast<const uint4*>(x);
  const uint4 zero = make_uint4(0, 0, 0, 0);
  float acc[kTiles][4];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  for (int tile = 0; tile < num_tiles; ++tile) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // this tile is in; the slot computed last iteration is free
    copy_tile(tile + kStages - 1);
    const uint4(*stage)[kTileStride] = tiles[tile % kStages];
#pragma unroll
    for (int group = 0; group < 2; ++group) {
      const int piece = 8 * warp + 4 * group + t4;
      const int c = tile * kTilePieces + piece;
      const uint4 lo = stage[g][piece], hi = stage[g + 8][piece];
      const uint32_t a0[4] = {lo.x, hi.x, lo.y, hi.y};
      const uint32_t a1[4] = {lo.z, hi.z, lo.w, hi.w};
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
        const int token = 8 * j + g;
        const uint4 xv =
            c < pieces && token < m ? __ldg(x_rows + int64_t(token) * pieces + c) : zero;
        mma_bf16_16816(acc[j], a0, xv.x, xv.y);
        mma_bf16_16816(acc[j], a1, xv.z, xv.w);
      }
    }
  }
  cp_async_wait<0>();
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    const int col = 8 * j + 2 * t4;
    partial[warp][g][col] = acc[j][0];
    partial[warp][g][col + 1] = acc[j][1];
    partial[warp][g + 8][col] = acc[j][2];
    partial[warp][g + 8][col + 1] = acc[j][3];
  }
  __syncthreads();
  auto total = [&](int r, int token) {
    float s = 0.0f;
#pragma unroll
    for (int wi = 0; wi < kWarps; ++wi) s += partial[wi][r][token];
    return s;
  };
  for (int idx = tid; idx < kOutputs * m; idx += kThreads) {
    const int token = idx / kOutputs, o = idx % kOutputs, f = f0 + o;
    if (f >= n) continue;
    const int64_t at = int64_t(token) * n + f;
    if constexpr (kSilu) {
      const float gate = total(o, token), up = total(o + kOutputs, token);
      static_cast<bf16*>(y)[at] = __float2bfloat16_rn(gate / (1.0f + __expf(-gate)) * up);
    } else {
      const float v = total(o, token);
      if (y_bf16) {
        static_cast<bf16*>(y)[at] = __float2bfloat16_rn(v);
      } else {
        static_cast<float*>(y)[at] = v;
      }
    }
  }
}

template <int kTiles, bool kSilu>
void launch_mma(const bf16* x, const bf16* w, void* y, bool y_bf16, int m, int n, int k,
                cudaStream_t stream, bool overlap) {
  constexpr int kOutputs = kSilu ? kMmaRows / 2 : kMmaRows;
  launch_kernel(gemv_mma_kernel<kTiles, kSilu>, dim3((n + kOutputs - 1) / kOutputs),
                dim3(kThreads), 0, stream, overlap, x, w, y, y_bf16, m, n, k);
}

template <bool kSilu>
void launch(const char* name, const bf16* x, const bf16* w, void* y, bool y_bf16, int m, int n,
            int k, cudaStream_t stream, bool overlap) {
  if (m == 0 || n == 0) return;
  auto misaligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 != 0; };
  if (m < 0 || m > kGemvMaxTokens || k % 8 != 0 || misaligned(x) || misaligned(w) ||
      misaligned(y)) {
    throw_cuda_failure(name, __FILE__, __LINE__,
                       "needs 1..32 tokens, k a multiple of 8 and 16-byte aligned pointers");
  }
  switch (m) {
    case 1: launch_m<1, kSilu>(x, w, y, y_bf16, n, k, stream, overlap); break;
    case 2: launch_m<2, kSilu>(x, w, y, y_bf16, n, k, stream, overlap); break;
    case 3: launch_m<3, kSilu>(x, w, y, y_bf16, n, k, stream, overlap); break;
    case 4: launch_m<4, kSilu>(x, w, y, y_bf16, n, k, stream, overlap); break;
    default:  // 5..32: the tensor-core form, in column tiles of 8 tokens
      switch ((m + 7) / 8) {
        case 1: launch_mma<1, kSilu>(x, w, y, y_bf16, m, n, k, stream, overlap); break;
        case 2: launch_mma<2, kSilu>(x, w, y, y_bf16, m, n, k, stream, overlap); break;
        case 3: launch_mma<3, kSilu>(x, w, y, y_bf16, m, n, k, stream, overlap); break;
        default: launch_mma<4, kSilu>(x, w, y, y_bf16, m, n, k, stream, overlap); break;
      }
  }
  GPUFRAC_LAUNCH_CHECK();
}

}  // namespace

void launch_gemv(const bf16* x, const bf16* w, void* y, bool y_bf16, int m, int n, int k,
                 cudaStream_t stream, bool overlap) {
  launch<false>("launch_gemv", x, w, y, y_bf16, m, n, k, stream, overlap);
}

void launch_gemv_silu_mul(const bf16* x, const bf16* w_gate_up, bf16* y, int m, int n, int k,
                          cudaStream_t stream, bool overlap) {
  launch<true>("launch_gemv_silu_mul", x, w_gate_up, y, true, m, n, k, stream, overlap);
}

}  // namespace gpufrac::engine
