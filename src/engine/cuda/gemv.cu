#include "engine/cuda/gemv.h"

#include <atomic>

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

struct GemvArgs {
  const bf16* x;
  const bf16* w;
  void* y;
  GemvStore store;
  int n, k;
  GemvNorm leaves;         // weight null: none
  const float* take_sums;  // null: x as it is
  int take_parts;
  float take_eps;
};

// A row group is kRows weight rows. Plain (kSilu false): rows f0..f0+kRows-1 give those outputs
// of n. SiLU (kSilu true, w = [gate; up] with n rows each): rows f0, f0+1 of gate and of up give
// outputs silu(gate) * up for f0, f0+1 (bf16). Block b takes groups b, b + gridDim.x, ...: the
// grid holds no more blocks than are resident at once (gemv_grid), so no block waits for a slot
// and each streams its groups back to back. Thread t dots chunks t, t + 128, ... of each row
// with the same chunks of every x row (read through L1, where they stay for the block's next
// groups), kRows x kUnroll weight loads in flight; the loads of the next pass, or of the block's
// next group, are issued before this group's warps are summed through shared memory. The first
// weight loads are issued before waiting for the previous kernel (kernel_launch.cuh), which
// wrote x. A GemvNorm taken (the previous GEMV's group sums, a few KB) is summed right after the
// wait, while the weights are in flight; one left is written per group in the epilogue.
// Registers are capped so that four blocks fit per SM up to two tokens and three beyond (none
// spills at those caps).
template <int kM, bool kSilu, int kRows>
__global__ void __launch_bounds__(kThreads, kM <= 2 ? 4 : 3) gemv_kernel(GemvArgs a) {
  static_assert(!kSilu || kRows % 2 == 0, "gate and up rows pair up");
  constexpr int kOutputs = kSilu ? kRows / 2 : kRows;
  constexpr int kWarps = kThreads / 32;
  constexpr int kStride = kThreads * kUnroll;  // chunks per row one pass of the block covers
  __shared__ float partial[kWarps][kRows][kM];
  __shared__ float taken_sums[kWarps][kM];
  __shared__ float left_squares[kOutputs][kM];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int n = a.n, k = a.k;
  const int groups = (n + kOutputs - 1) / kOutputs;
  const int chunks = k / 8;
  const uint4* x_rows = reinterpret_cast<const uint4*>(a.x);
  uint4 wv[kRows][kUnroll];
  // Weight row r of `group` (null past n) and the loads of one pass starting at chunk c0.
  auto row_of = [&](int group, int r) -> const uint4* {
    const int f = group * kOutputs + (kSilu ? r % kOutputs : r);
    if (f >= n) return nullptr;
    const int64_t row = kSilu && r >= kOutputs ? int64_t(f) + n : int64_t(f);
    return reinterpret_cast<const uint4*>(a.w + row * k);
  };
  auto load_weights = [&](int group, int c0) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const uint4* w_row = row_of(group, r);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int c = c0 + u * kThreads;
        wv[r][u] = c < chunks && w_row ? load_streaming(w_row + c) : make_uint4(0, 0, 0, 0);
      }
    }
  };
  int group = blockIdx.x;
  if (group < groups) load_weights(group, tid);  // weights only: legal before the wait
  wait_for_previous_grid();
  allow_next_grid_launch();
  if (a.take_sums) {
#pragma unroll
    for (int m = 0; m < kM; ++m) {
      float sum = 0.0f;
      for (int b = tid; b < a.take_parts; b += kThreads) sum += a.take_sums[m * a.take_parts + b];
      sum = warp_sum(sum);
      if (lane == 0) taken_sums[warp][m] = sum;
    }
  }
  for (; group < groups; group += gridDim.x) {
    float acc[kRows][kM];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int m = 0; m < kM; ++m) acc[r][m] = 0.0f;
    }
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
      if (c0 + kStride < chunks) {
        load_weights(group, c0 + kStride);
      } else if (group + int(gridDim.x) < groups) {
        load_weights(group + gridDim.x, tid);
      }
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
    const int o = tid / kM, m = tid % kM;  // the output this thread finishes, if o < kOutputs
    const int f = group * kOutputs + o;
    const bool finishes = o < kOutputs && f < n;
    auto total = [&](int r) {
      float s = 0.0f;
#pragma unroll
      for (int wi = 0; wi < kWarps; ++wi) s += partial[wi][r][m];
      return s;
    };
    float scale = 1.0f;
    if (a.take_sums && o < kOutputs) {
      float sum = 0.0f;
#pragma unroll
      for (int wi = 0; wi < kWarps; ++wi) sum += taken_sums[wi][m];
      scale = rsqrtf(sum / float(k) + a.take_eps);
    }
    const int64_t at = int64_t(m) * n + f;
    if constexpr (kSilu) {
      if (finishes) {
        const float gate = total(o) * scale, up = total(o + kOutputs) * scale;
        static_cast<bf16*>(a.y)[at] = __float2bfloat16_rn(gate / (1.0f + __expf(-gate)) * up);
      }
    } else {
      float square = 0.0f;  // of the updated residual, for a GemvNorm left
      if (finishes) {
        const float v = total(o) * scale;
        switch (a.store) {
          case GemvStore::bf16: static_cast<bf16*>(a.y)[at] = __float2bfloat16_rn(v); break;
          case GemvStore::fp32: static_cast<float*>(a.y)[at] = v; break;
          case GemvStore::add_fp32: {
            float* y = static_cast<float*>(a.y);
            const float r = y[at] + v;
            y[at] = r;
            if (a.leaves.weight) {
              a.leaves.rows[at] = __float2bfloat16_rn(r * a.leaves.weight[f]);
              square = r * r;
            }
            break;
          }
        }
      }
      if (a.leaves.weight) {  // the same for every thread of the grid
        if (o < kOutputs) left_squares[o][m] = square;
        __syncthreads();
        if (tid < kM) {
          float sum = 0.0f;
#pragma unroll
          for (int r = 0; r < kOutputs; ++r) sum += left_squares[r][tid];
          a.leaves.sums[tid * a.leaves.parts + group] = sum;
        }
      }
    }
    __syncthreads();  // partial and left_squares are the next group's
  }
}

// SMs of the current device the process may use (cudaDevAttrMultiProcessorCount, which an MPS
// active-thread percentage lowers), asked once per device (each time past kRememberedDevices).
int device_sms() {
  constexpr int kRememberedDevices = 64;
  static std::atomic<int> remembered[kRememberedDevices];
  int device = 0;
  GPUFRAC_CUDA_CHECK(cudaGetDevice(&device));
  int sms = device < kRememberedDevices ? remembered[device].load(std::memory_order_relaxed) : 0;
  if (sms == 0) {
    GPUFRAC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    if (device < kRememberedDevices) remembered[device].store(sms, std::memory_order_relaxed);
  }
  return sms;
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

// Row groups each block takes when `groups` are spread over `slots` blocks (the largest share).
int64_t groups_per_block(int64_t groups, int64_t slots) { return (groups + slots - 1) / slots; }

// The grid of gemv_kernel<kM, kSilu, kRows> for `groups` row groups: no more blocks than are
// resident at once, each taking the same number of groups (but the last).
template <int kM, bool kSilu, int kRows>
int64_t gemv_grid(int64_t groups) {
  const int64_t each =
      groups_per_block(groups, int64_t(blocks_per_sm<kM, kSilu, kRows>()) * device_sms());
  return (groups + each - 1) / each;
}

// Rows per group of the plain GEMV: four, or five where that leaves each block fewer rows to
// stream (n = 2560 on 132 SMs with 528 blocks resident: 640 groups of four rows are two per
// block, eight rows; 512 of five are one, five rows). Only one token: with more, five rows need
// more registers. The fused SiLU form keeps four (gate and up rows pair up).
int plain_rows_per_group(int m, int n) {
  if (m != 1) return 4;
  const int64_t sms = device_sms();
  const int64_t rows4 = groups_per_block((n + 3) / 4, blocks_per_sm<1, false, 4>() * sms) * 4;
  const int64_t rows5 = groups_per_block((n + 4) / 5, blocks_per_sm<1, false, 5>() * sms) * 5;
  return rows5 < rows4 ? 5 : 4;
}

template <int kM, bool kSilu, int kRows>
void launch_rows(const GemvArgs& a, cudaStream_t stream, bool overlap) {
  constexpr int kOutputs = kSilu ? kRows / 2 : kRows;
  const int64_t grid = gemv_grid<kM, kSilu, kRows>((a.n + kOutputs - 1) / kOutputs);
  launch_kernel(gemv_kernel<kM, kSilu, kRows>, dim3(unsigned(grid)), dim3(kThreads), 0, stream,
                overlap, a);
}

template <int kM, bool kSilu>
void launch_m(const GemvArgs& a, cudaStream_t stream, bool overlap) {
  if constexpr (kM == 1 && !kSilu) {
    if (plain_rows_per_group(1, a.n) == 5) {
      launch_rows<kM, false, 5>(a, stream, overlap);
      return;
    }
  }
  launch_rows<kM, kSilu, 4>(a, stream, overlap);
}

template <bool kSilu>
void launch(const char* name, const GemvArgs& a, int m, cudaStream_t stream, bool overlap) {
  if (m == 0 || a.n == 0) return;
  auto misaligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 != 0; };
  if (m < 0 || m > kGemvMaxTokens || a.k % 8 != 0 || misaligned(a.x) || misaligned(a.w) ||
      misaligned(a.y)) {
    throw_cuda_failure(name, __FILE__, __LINE__,
                       "needs 1..8 tokens, k a multiple of 8 and 16-byte aligned pointers");
  }
  const GemvNorm& left = a.leaves;
  if (left.weight && (a.store != GemvStore::add_fp32 || left.parts != gemv_groups(m, a.n) ||
                      misaligned(left.weight) || misaligned(left.rows) || misaligned(left.sums))) {
    throw_cuda_failure(name, __FILE__, __LINE__,
                       "a GemvNorm is left by an add_fp32 GEMV with parts = gemv_groups(m, n)");
  }
  switch (m) {
    case 1: launch_m<1, kSilu>(a, stream, overlap); break;
    case 2: launch_m<2, kSilu>(a, stream, overlap); break;
    case 3: launch_m<3, kSilu>(a, stream, overlap); break;
    case 4: launch_m<4, kSilu>(a, stream, overlap); break;
    case 5: launch_m<5, kSilu>(a, stream, overlap); break;
    case 6: launch_m<6, kSilu>(a, stream, overlap); break;
    case 7: launch_m<7, kSilu>(a, stream, overlap); break;
    default: launch_m<8, kSilu>(a, stream, overlap); break;
  }
  GPUFRAC_LAUNCH_CHECK();
}

// The arguments of a GEMV reading x, or the rows a GemvNorm left (then x must be those).
GemvArgs arguments(const char* name, const bf16* x, const bf16* w, void* y, GemvStore store,
                   int n, int k, const GemvNorm* leaves, const GemvNorm* takes) {
  if (takes && x != takes->rows) {
    throw_cuda_failure(name, __FILE__, __LINE__, "a GEMV taking a GemvNorm reads its rows");
  }
  return GemvArgs{x,
                  w,
                  y,
                  store,
                  n,
                  k,
                  leaves ? *leaves : GemvNorm{},
                  takes ? takes->sums : nullptr,
                  takes ? takes->parts : 0,
                  takes ? takes->eps : 0.0f};
}

}  // namespace

int gemv_groups(int m, int n) {
  const int rows = plain_rows_per_group(m, n);
  return (n + rows - 1) / rows;
}

void launch_gemv(const bf16* x, const bf16* w, void* y, GemvStore store, int m, int n, int k,
                 cudaStream_t stream, bool overlap, const GemvNorm* leaves,
                 const GemvNorm* takes) {
  launch<false>("launch_gemv", arguments("launch_gemv", x, w, y, store, n, k, leaves, takes), m,
                stream, overlap);
}

void launch_gemv_silu_mul(const bf16* x, const bf16* w_gate_up, bf16* y, int m, int n, int k,
                          cudaStream_t stream, bool overlap, const GemvNorm* takes) {
  launch<true>("launch_gemv_silu_mul",
               arguments("launch_gemv_silu_mul", x, w_gate_up, y, GemvStore::bf16, n, k, nullptr,
                         takes),
               m, stream, overlap);
}

}  // namespace gpufrac::engine
