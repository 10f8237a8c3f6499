// GPU tests (label gpu) of the CUDA runner's fast kernels against the simple ones they replace,
// on fresh random inputs with every output poisoned first (NaN bytes), so an unwritten or
// mis-indexed element fails:
// - the weight-streaming GEMV (gemv.h) against cuBLASLt, every token count 1..8, bf16 and fp32
//   outputs, the model's shapes and odd ones; the fused gate|up + SiLU*mul GEMV likewise; an
//   RMSNorm handed from one GEMV to the next (GemvNorm) against launch_rmsnorm and cuBLASLt; a
//   chain of GEMVs launched overlapped (kernel_launch.cuh) against the same chain launched plainly;
// - fast attention (flash prefill + tiled decode, attention.h) against the simple kernel:
//   decode rows at many context lengths and split counts, prompt chunks (whole prompts, chunks
//   after a prefix, exactly kFlashMinQueries rows) mixed with decode rows, head_dim 64 and 128,
//   GQA groups 2, 4 and 8, shuffled block tables; the decode kernel applying q/k norm + RoPE
//   and writing the new K/V itself against launch_qkv_rope_kv before it.
// tests/gpu/engine/run runs these first (gtest filter CudaFastPath*) and switches the rest of the
// suite to GPUFRAC_CUDA_SIMPLE=1 if they fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/cuda/attention.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/gemm.h"
#include "engine/cuda/gemv.h"
#include "engine/cuda/layer_kernels.h"
#include "engine/model/tensor.h"

namespace gpufrac::engine {
namespace {

std::vector<uint16_t> random_bf16(size_t count, std::mt19937& rng, float stddev) {
  std::normal_distribution<float> normal(0, stddev);
  std::vector<uint16_t> out(count);
  for (uint16_t& v : out) v = float_to_bf16(normal(rng));
  return out;
}

DeviceBuffer upload(const void* data, size_t bytes) {
  DeviceBuffer buffer(std::max<size_t>(bytes, 16), "test input");
  GPUFRAC_CUDA_CHECK(cudaMemcpy(buffer.data(), data, bytes, cudaMemcpyHostToDevice));
  return buffer;
}

template <typename T>
std::vector<T> download(const DeviceBuffer& buffer, size_t count) {
  std::vector<T> out(count);
  GPUFRAC_CUDA_CHECK(cudaMemcpy(out.data(), buffer.data(), count * sizeof(T), cudaMemcpyDeviceToHost));
  return out;
}

// ||a - b|| / ||b||; infinity when anything is not finite.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

std::vector<float> bf16_to_floats(const std::vector<uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = bf16_to_float(bits[i]);
  return out;
}

// --- GEMV ---------------------------------------------------------------------------------

void check_gemv(int n, int k, uint32_t seed) {
  std::mt19937 rng(seed);
  CublasLtGemm gemm;
  std::vector<uint16_t> w = random_bf16(size_t(n) * k, rng, 0.05f);
  std::vector<uint16_t> x = random_bf16(size_t(kGemvMaxTokens) * k, rng, 1.0f);
  DeviceBuffer dw = upload(w.data(), w.size() * 2), dx = upload(x.data(), x.size() * 2);
  DeviceBuffer y_ref(size_t(kGemvMaxTokens) * n * 4, "reference"), y(size_t(kGemvMaxTokens) * n * 4, "gemv");
  for (int m = 1; m <= kGemvMaxTokens; ++m) {
    for (bool y_bf16 : {false, true}) {
      const size_t count = size_t(m) * n;
      GPUFRAC_CUDA_CHECK(cudaMemset(y.data(), 0xff, size_t(kGemvMaxTokens) * n * 4));  // NaN
      gemm.run(dx.as<bf16>(), dw.as<bf16>(), y_ref.data(), y_bf16, m, n, k, nullptr);
      launch_gemv(dx.as<bf16>(), dw.as<bf16>(), y.data(), y_bf16 ? GemvStore::bf16 : GemvStore::fp32,
                  m, n, k, nullptr);
      GPUFRAC_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<float> got, want;
      if (y_bf16) {
        got = bf16_to_floats(download<uint16_t>(y, count));
        want = bf16_to_floats(download<uint16_t>(y_ref, count));
      } else {
        got = download<float>(y, count);
        want = download<float>(y_ref, count);
      }
      double error = relative_error(got, want);
      EXPECT_LT(error, y_bf16 ? 1e-2 : 1e-4)
          << "gemv m=" << m << " n=" << n << " k=" << k << (y_bf16 ? " bf16" : " fp32");
      // The element after the output must stay untouched (poisoned) in the fp32 case.
      if (!y_bf16 && m < kGemvMaxTokens) {
        std::vector<float> after = download<float>(y, count + 1);
        EXPECT_TRUE(std::isnan(after[count])) << "gemv wrote past its output, m=" << m;
      }
    }
  }
}

TEST(CudaFastPathGemv, MatchesCublasOnQwen3Shapes) {
  check_gemv(6144, 2560, 1);   // qkv
  check_gemv(2560, 4096, 2);   // o
  check_gemv(2560, 9728, 3);   // down
}

TEST(CudaFastPathGemv, MatchesCublasOnOddShapes) {
  check_gemv(1003, 2560, 4);  // features not a multiple of the block's warps
  check_gemv(37, 24, 5);      // fewer 16-byte chunks than lanes
  check_gemv(130, 776, 6);    // chunks not a multiple of the unrolled stride
  check_gemv(2558, 1000, 9);  // five rows per block at m = 1 on 132 SMs, the last block short
}

// The fused gate|up GEMV (launch_gemv_silu_mul) against cuBLASLt's fp32 gate|up product with
// silu(gate) * up taken on the host.
void check_gemv_silu_mul(int n, int k, uint32_t seed) {
  std::mt19937 rng(seed);
  CublasLtGemm gemm;
  std::vector<uint16_t> w = random_bf16(size_t(2 * n) * k, rng, 0.05f);
  std::vector<uint16_t> x = random_bf16(size_t(kGemvMaxTokens) * k, rng, 1.0f);
  DeviceBuffer dw = upload(w.data(), w.size() * 2), dx = upload(x.data(), x.size() * 2);
  DeviceBuffer gate_up(size_t(kGemvMaxTokens) * 2 * n * 4, "reference");
  DeviceBuffer y(size_t(kGemvMaxTokens) * n * 2 + 16, "gemv");
  for (int m = 1; m <= kGemvMaxTokens; ++m) {
    const size_t count = size_t(m) * n;
    GPUFRAC_CUDA_CHECK(cudaMemset(y.data(), 0xff, y.bytes()));  // NaN
    gemm.run(dx.as<bf16>(), dw.as<bf16>(), gate_up.data(), false, m, 2 * n, k, nullptr);
    launch_gemv_silu_mul(dx.as<bf16>(), dw.as<bf16>(), y.as<bf16>(), m, n, k, nullptr);
    GPUFRAC_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> products = download<float>(gate_up, size_t(m) * 2 * n);
    std::vector<float> want(count);
    for (int t = 0; t < m; ++t) {
      for (int i = 0; i < n; ++i) {
        float gate = products[size_t(t) * 2 * n + i], up = products[size_t(t) * 2 * n + n + i];
        want[size_t(t) * n + i] = gate / (1.0f + std::exp(-gate)) * up;
      }
    }
    std::vector<uint16_t> raw = download<uint16_t>(y, count + 1);
    EXPECT_TRUE(std::isnan(bf16_to_float(raw[count]))) << "wrote past its output, m=" << m;
    raw.resize(count);
    EXPECT_LT(relative_error(bf16_to_floats(raw), want), 1e-2)
        << "gemv silu*mul m=" << m << " n=" << n << " k=" << k;
  }
}

TEST(CudaFastPathGemv, FusedSiluMulMatchesCublas) {
  check_gemv_silu_mul(9728, 2560, 7);  // Qwen3-4B gate|up
  check_gemv_silu_mul(1001, 776, 8);   // odd features and chunks
}

std::vector<float> random_floats(size_t count, std::mt19937& rng, float stddev) {
  std::normal_distribution<float> normal(0, stddev);
  std::vector<float> out(count);
  for (float& v : out) v = normal(rng);
  return out;
}

// An RMSNorm carried between two GEMVs (GemvNorm), as a decode layer runs it: the first adds
// x1 W1^T into residual rows r and leaves the norm; the second multiplies RMSNorm(r) by W2 (plain
// and fused SiLU forms). Against cuBLASLt accumulating into r, launch_rmsnorm and cuBLASLt
// again, for every token count; the residual must match too, and the second GEMV's result is
// the same bits when run twice (the sums are taken in a fixed order).
void check_gemv_norm_handoff(int hidden, int k1, int n2, uint32_t seed) {
  std::mt19937 rng(seed);
  CublasLtGemm gemm;
  auto upload_floats = [](const std::vector<float>& v) { return upload(v.data(), v.size() * 4); };
  std::vector<uint16_t> w1 = random_bf16(size_t(hidden) * k1, rng, 0.05f);
  std::vector<uint16_t> w2 = random_bf16(size_t(2 * n2) * hidden, rng, 0.05f);
  std::vector<uint16_t> x1 = random_bf16(size_t(kGemvMaxTokens) * k1, rng, 1.0f);
  const std::vector<float> r0 = random_floats(size_t(kGemvMaxTokens) * hidden, rng, 2.0f);
  const std::vector<float> g = random_floats(size_t(hidden), rng, 0.5f);
  DeviceBuffer dw1 = upload(w1.data(), w1.size() * 2), dw2 = upload(w2.data(), w2.size() * 2);
  DeviceBuffer dx1 = upload(x1.data(), x1.size() * 2), dg = upload_floats(g);
  DeviceBuffer r(r0.size() * 4, "residual"), r_ref(r0.size() * 4, "residual reference");
  DeviceBuffer rows(size_t(kGemvMaxTokens) * hidden * 2, "norm rows");
  DeviceBuffer sums(size_t(kGemvMaxTokens) * hidden * 4, "norm sums");
  DeviceBuffer normed(size_t(kGemvMaxTokens) * hidden * 2, "normed reference");
  DeviceBuffer y(size_t(kGemvMaxTokens) * 2 * n2 * 4 + 16, "y"), y_ref(y.bytes(), "y reference");
  for (int m = 1; m <= kGemvMaxTokens; ++m) {
    for (bool silu : {false, true}) {
      const size_t count = size_t(m) * (silu ? n2 : 2 * n2);
      GPUFRAC_CUDA_CHECK(cudaMemcpy(r.data(), r0.data(), r.bytes(), cudaMemcpyHostToDevice));
      GPUFRAC_CUDA_CHECK(cudaMemcpy(r_ref.data(), r0.data(), r.bytes(), cudaMemcpyHostToDevice));
      GPUFRAC_CUDA_CHECK(cudaMemset(rows.data(), 0xff, rows.bytes()));  // NaN
      GPUFRAC_CUDA_CHECK(cudaMemset(sums.data(), 0xff, sums.bytes()));
      gemm.run(dx1.as<bf16>(), dw1.as<bf16>(), r_ref.data(), false, m, hidden, k1, nullptr, true);
      launch_rmsnorm(r_ref.as<float>(), nullptr, m, hidden, dg.as<float>(), 1e-6f,
                     normed.as<bf16>(), nullptr);
      gemm.run(normed.as<bf16>(), dw2.as<bf16>(), y_ref.data(), false, m, 2 * n2, hidden, nullptr);
      GemvNorm norm{dg.as<float>(), rows.as<bf16>(), sums.as<float>(), gemv_groups(m, hidden),
                    1e-6f};
      launch_gemv(dx1.as<bf16>(), dw1.as<bf16>(), r.data(), GemvStore::add_fp32, m, hidden, k1,
                  nullptr, false, &norm);
      std::vector<std::vector<uint16_t>> runs;
      for (int run = 0; run < 2; ++run) {
        GPUFRAC_CUDA_CHECK(cudaMemset(y.data(), 0xff, y.bytes()));  // NaN
        if (silu) {
          launch_gemv_silu_mul(rows.as<bf16>(), dw2.as<bf16>(), y.as<bf16>(), m, n2, hidden,
                               nullptr, false, &norm);
        } else {
          launch_gemv(rows.as<bf16>(), dw2.as<bf16>(), y.data(), GemvStore::fp32, m, 2 * n2,
                      hidden, nullptr, false, nullptr, &norm);
        }
        GPUFRAC_CUDA_CHECK(cudaDeviceSynchronize());
        runs.push_back(download<uint16_t>(y, count * (silu ? 1 : 2) + 1));
      }
      EXPECT_EQ(runs[0], runs[1]) << "m=" << m << (silu ? " silu" : "");
      EXPECT_LT(relative_error(download<float>(r, size_t(m) * hidden),
                               download<float>(r_ref, size_t(m) * hidden)),
                1e-5)
          << "residual, m=" << m;
      const std::vector<float> products = download<float>(y_ref, size_t(m) * 2 * n2);
      std::vector<float> want, got;
      if (silu) {
        for (int t = 0; t < m; ++t) {
          for (int i = 0; i < n2; ++i) {
            const float gate = products[size_t(t) * 2 * n2 + i];
            const float up = products[size_t(t) * 2 * n2 + n2 + i];
            want.push_back(gate / (1.0f + std::exp(-gate)) * up);
          }
        }
        std::vector<uint16_t> raw = runs[0];
        EXPECT_TRUE(std::isnan(bf16_to_float(raw[count]))) << "wrote past its output, m=" << m;
        raw.resize(count);
        got = bf16_to_floats(raw);
      } else {
        want = products;
        got = download<float>(y, count + 1);
        EXPECT_TRUE(std::isnan(got[count])) << "wrote past its output, m=" << m;
        got.resize(count);
      }
      // bf16(r * g) * s against bf16(r * s * g): the rows round differently, by ~2^-9 each.
      EXPECT_LT(relative_error(got, want), silu ? 2e-2 : 1e-2)
          << "hand-off m=" << m << " hidden=" << hidden << (silu ? " silu" : "");
    }
  }
}

TEST(CudaFastPathGemv, NormHandedBetweenGemvsMatchesRmsnormAndCublas) {
  check_gemv_norm_handoff(2560, 4096, 9728, 12);  // Qwen3-4B: o, then gate|up
  check_gemv_norm_handoff(1000, 776, 1001, 13);   // the last block short, odd features
}

// A chain of GEMVs, each reading the previous one's output as x and overwriting the buffer the
// one before it read (the runner's pattern), launched overlapped (kernel_launch.cuh): every link
// must wait for its predecessor before reading x or writing y, so the chain ends bit for bit
// where the plainly launched chain does. The buffers are poisoned (NaN) before each run, so a
// link that read x early would see NaN or the other run's values.
TEST(CudaFastPathGemv, OverlappedChainEqualsPlainChain) {
  constexpr int kLinks = 12, kDim = 2048;
  std::mt19937 rng(11);
  std::vector<DeviceBuffer> weights;
  for (int i = 0; i < kLinks; ++i) {
    std::vector<uint16_t> w = random_bf16(size_t(kDim) * kDim, rng, 0.02f);
    weights.push_back(upload(w.data(), w.size() * 2));
  }
  std::vector<uint16_t> x0 = random_bf16(size_t(kGemvMaxTokens) * kDim, rng, 1.0f);
  DeviceBuffer input = upload(x0.data(), x0.size() * 2);
  DeviceBuffer act[2] = {DeviceBuffer(size_t(kGemvMaxTokens) * kDim * 2, "chain"),
                         DeviceBuffer(size_t(kGemvMaxTokens) * kDim * 2, "chain")};
  cudaStream_t stream = nullptr;
  GPUFRAC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto run = [&](int m, bool overlap) {
    for (DeviceBuffer& b : act) GPUFRAC_CUDA_CHECK(cudaMemsetAsync(b.data(), 0xff, b.bytes(), stream));
    const bf16* x = input.as<bf16>();
    for (int i = 0; i < kLinks; ++i) {
      bf16* y = act[i % 2].as<bf16>();
      launch_gemv(x, weights[size_t(i)].as<bf16>(), y, GemvStore::bf16, m, kDim, kDim, stream,
                  overlap);
      x = y;
    }
    GPUFRAC_CUDA_CHECK(cudaStreamSynchronize(stream));
    return download<uint16_t>(act[(kLinks - 1) % 2], size_t(m) * kDim);
  };
  for (int m : {1, 2, 4}) {
    std::vector<uint16_t> plain = run(m, false), overlapped = run(m, true);
    EXPECT_EQ(plain, overlapped) << "m=" << m;
    std::vector<float> values = bf16_to_floats(plain);
    EXPECT_TRUE(std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); }))
        << "m=" << m;
  }
  cudaStreamDestroy(stream);
}

// --- Attention ----------------------------------------------------------------------------

struct SeqSpec {
  int start = 0;    // positions already in the cache
  int queries = 1;  // rows this step
};

struct AttentionCase {
  int num_heads = 32, num_kv_heads = 8, head_dim = 128;
  int block_size = 16;
  std::vector<SeqSpec> seqs;
  int forced_splits = 0;  // 0: attention_splits for 132 SMs and the longest context
};

// Runs the simple and the fast kernels on the same random inputs and compares their outputs.
void check_attention(const AttentionCase& c, uint32_t seed, const char* what) {
  std::mt19937 rng(seed);
  const int seqs = int(c.seqs.size()), bs = c.block_size, d = c.head_dim;
  int rows = 0, max_context = 0, max_queries = 1, min_queries = INT_MAX, width = 1;
  int decode_rows = 0;  // as the runner passes it: up to the last sequence of few rows
  // As the runner passes it: the sequences before the first of many rows.
  auto is_long = [](const SeqSpec& s) { return s.queries >= kFlashMinQueries; };
  const int short_seqs = int(std::find_if(c.seqs.begin(), c.seqs.end(), is_long) - c.seqs.begin());
  for (const SeqSpec& s : c.seqs) {
    rows += s.queries;
    if (s.queries < kFlashMinQueries) decode_rows = rows;
    max_context = std::max(max_context, s.start + s.queries);
    max_queries = std::max(max_queries, s.queries);
    min_queries = std::min(min_queries, s.queries);
    width = std::max(width, (s.start + s.queries + bs - 1) / bs);
  }
  // Every sequence gets `width` distinct blocks in a shuffled pool (plus spare blocks).
  const int num_blocks = seqs * width + 3;
  std::vector<int32_t> pool(static_cast<size_t>(num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<int32_t> tables(size_t(seqs) * width), token_seq, token_context, query_start;
  for (int s = 0; s < seqs; ++s) {
    for (int b = 0; b < width; ++b) tables[size_t(s) * width + b] = pool[size_t(s) * width + b];
    query_start.push_back(int32_t(token_seq.size()));
    for (int j = 0; j < c.seqs[size_t(s)].queries; ++j) {
      token_seq.push_back(s);
      token_context.push_back(c.seqs[size_t(s)].start + j + 1);
    }
  }
  query_start.push_back(rows);
  StepHeader header{};
  header.table_width = width;
  const size_t kv_elements = size_t(num_blocks) * c.num_kv_heads * bs * d;
  std::vector<uint16_t> k = random_bf16(kv_elements, rng, 1.0f);
  std::vector<uint16_t> v = random_bf16(kv_elements, rng, 1.0f);
  std::vector<uint16_t> q = random_bf16(size_t(rows) * c.num_heads * d, rng, 1.0f);

  DeviceBuffer dk = upload(k.data(), k.size() * 2), dv = upload(v.data(), v.size() * 2);
  DeviceBuffer dq = upload(q.data(), q.size() * 2);
  DeviceBuffer dheader = upload(&header, sizeof header);
  DeviceBuffer dtables = upload(tables.data(), tables.size() * 4);
  DeviceBuffer dseq = upload(token_seq.data(), token_seq.size() * 4);
  DeviceBuffer dcontext = upload(token_context.data(), token_context.size() * 4);
  DeviceBuffer dstart = upload(query_start.data(), query_start.size() * 4);

  AttentionParams p;
  p.q = dq.as<bf16>();
  p.k_cache = dk.as<bf16>();
  p.v_cache = dv.as<bf16>();
  p.header = dheader.as<StepHeader>();
  p.block_tables = dtables.as<int32_t>();
  p.token_seq = dseq.as<int32_t>();
  p.token_context = dcontext.as<int32_t>();
  p.seq_query_start = dstart.as<int32_t>();
  p.num_seqs = seqs;
  p.max_queries = max_queries;
  p.min_queries = min_queries;  // every sequence a prompt: the decode kernel is skipped
  p.rows = rows;
  p.decode_rows = decode_rows;
  p.num_heads = c.num_heads;
  p.num_kv_heads = c.num_kv_heads;
  p.head_dim = d;
  p.block_size = bs;
  p.scale = 1.0f / std::sqrt(float(d));
  p.splits = c.forced_splits > 0
                 ? c.forced_splits
                 : attention_splits(decode_rows, c.num_heads, c.num_kv_heads, 132, max_context,
                                    max_queries >= kFlashMinQueries);
  const size_t out_elements = size_t(rows) * c.num_heads * d;
  DeviceBuffer partial_out(out_elements * size_t(p.splits) * 4, "partials");
  DeviceBuffer partial_lse(size_t(rows) * c.num_heads * size_t(p.splits) * 4, "partial lse");
  p.partial_out = partial_out.as<float>();
  p.partial_lse = partial_lse.as<float>();

  // Variants: simple; fast, launched plainly, flash blocks of two heads (the mma.sync kernel);
  // fast as the runner launches it (the SM count known: one head per mma.sync flash block when
  // pairs would not fill the GPU; overlapped launches on sm_90 and later: the decode kernel
  // beside the flash kernel; prompt chunks on the Hopper flash kernel where it runs,
  // flash_hopper.cu); the same with the mma.sync flash kernel; the first as a persistent grid on
  // three SMs (each block takes many tiles) with the decode blocks on the others, the last of
  // them waiting for it (AttentionParams::flash_sms, beside_flash_exits).
  int device = 0, major = 0;
  GPUFRAC_CUDA_CHECK(cudaGetDevice(&device));
  GPUFRAC_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  cudaStream_t stream = nullptr;
  GPUFRAC_CUDA_CHECK(cudaStreamCreate(&stream));
  constexpr int kVariants = 5;
  const char* const names[kVariants] = {"simple", "plain", "as the runner launches it",
                                        "as the runner, mma.sync flash",
                                        "as the runner, flash on three SMs"};
  DeviceBuffer exits(4, "exit counter");
  GPUFRAC_CUDA_CHECK(cudaMemset(exits.data(), 0, 4));
  std::vector<float> results[kVariants];
  for (int variant = 0; variant < kVariants; ++variant) {
    DeviceBuffer out(out_elements * 2, "attention out");
    GPUFRAC_CUDA_CHECK(cudaMemset(out.data(), 0xff, out_elements * 2));  // bf16 NaN
    p.out = out.as<bf16>();
    p.kernels = variant == 0 ? AttentionKernels::kSimple : AttentionKernels::kFast;
    p.sm_count = variant >= 2 ? 132 : 0;
    p.first_flash_seq = variant >= 2 ? short_seqs : 0;
    p.overlap = variant >= 2 && major >= 9;
    p.hopper_flash = variant == 2 || variant == 4;
    p.flash_sms = variant == 4 ? 3 : 0;
    p.beside_flash_exits = variant == 4 ? exits.as<int32_t>() : nullptr;
    launch_paged_attention(p, stream);
    GPUFRAC_CUDA_CHECK(cudaStreamSynchronize(stream));
    results[variant] = bf16_to_floats(download<uint16_t>(out, out_elements));
    EXPECT_EQ(download<int32_t>(exits, 1)[0], 0) << what << ": the counter is left for the next";
  }
  GPUFRAC_CUDA_CHECK(cudaStreamDestroy(stream));
  for (int variant = 1; variant < kVariants; ++variant) {
    double error = relative_error(results[variant], results[0]);
    std::printf("fast attention %s (%s): rows %d, splits %d, max context %d, relative error %.2e\n",
                what, names[variant], rows, p.splits, max_context, error);
    // bf16 outputs (~4e-3 relative rounding) and, in the flash kernel, bf16 probabilities.
    EXPECT_LT(error, 2e-2) << what << " (" << names[variant] << ")";
  }
}

// attention_splits plans whole waves of kDecodeBlocksPerSm (3) blocks per SM: Qwen3-4B's 8 KV
// heads at 132 SMs (396 slots); beside the flash kernel, of one block per SM (132 slots).
TEST(CudaFastPathAttention, SplitsFillWholeWaves) {
  EXPECT_EQ(attention_splits(1, 32, 8, 132, 2048, false), 32);  // 256 blocks of one tile
  // 32 rows: 1 split is 256 blocks of 32 tiles (one wave, 65% full), 2 splits 1.3 waves; 3
  // splits are two full waves of 11 tiles.
  EXPECT_EQ(attention_splits(32, 32, 8, 132, 2048, false), 3);
  EXPECT_EQ(attention_splits(396, 32, 8, 132, 2048, false), 1);  // 8 waves: never split
  EXPECT_EQ(attention_splits(1, 32, 8, 16, 2048, false), 6);     // 48 slots at a 12.5% share
  EXPECT_LE(attention_splits(1, 32, 8, 132, 100, false), 2);     // splits cover 64 positions
  EXPECT_EQ(attention_splits(1, 32, 8, 132, 0, false), 32);      // unknown: planned for 2048
  // Beside a flash kernel: a served step's 31 decodes stay whole (248 blocks, two waves of 132
  // slots; three splits would be six), a single decode takes 16 splits (128 blocks, one wave).
  EXPECT_EQ(attention_splits(31, 32, 8, 132, 2048, true), 1);
  EXPECT_EQ(attention_splits(1, 32, 8, 132, 2048, true), 16);
  for (int sms : {1, 16, 66, 132}) {
    const int64_t floats = attention_partial_floats(32, 8, 128, sms);
    for (bool beside_flash : {false, true}) {
      for (int rows = 1; rows <= 4096; ++rows) {
        const int splits = attention_splits(rows, 32, 8, sms, 0, beside_flash);
        ASSERT_GE(splits, 1);
        if (splits > 1) {
          ASSERT_LE(int64_t(rows) * 32 * splits * 128, floats) << rows << " rows";
        }
      }
    }
  }
}

// A decode-only step streams whole contexts (three K/V stages, two blocks per SM) once its
// unsplit grid fills nine tenths of such a wave: 238 of 264 slots on 132 SMs, 30 rows of 8 KV
// heads.
TEST(CudaFastPathAttention, WholeContextsFromNineTenthsOfAWave) {
  EXPECT_FALSE(decode_streams_whole_contexts(1, 32, 8, 132));
  EXPECT_FALSE(decode_streams_whole_contexts(29, 32, 8, 132));  // 232 blocks
  EXPECT_TRUE(decode_streams_whole_contexts(30, 32, 8, 132));   // 240 blocks
  EXPECT_TRUE(decode_streams_whole_contexts(64, 32, 8, 132));   // two waves
  EXPECT_FALSE(decode_streams_whole_contexts(3, 32, 8, 16));    // 24 of 32 slots
  EXPECT_TRUE(decode_streams_whole_contexts(4, 32, 8, 16));     // 32 of 32 slots
  EXPECT_FALSE(decode_streams_whole_contexts(64, 32, 8, 0));    // SM count unknown
}

TEST(CudaFastPathAttention, DecodeRowsMatchSimpleAtManyContexts) {
  AttentionCase c;
  for (int context : {1, 2, 15, 16, 17, 63, 64, 65, 300, 2048}) c.seqs.push_back({context - 1, 1});
  check_attention(c, 11, "decode, auto splits");
  for (int splits : {1, 3, 32}) {
    c.forced_splits = splits;
    check_attention(c, 12 + uint32_t(splits), "decode, forced splits");
  }
}

TEST(CudaFastPathAttention, SingleDecodeRowSplitsAcrossTheGrid) {
  AttentionCase c;
  c.seqs = {{2047, 1}};
  check_attention(c, 21, "one decode row at 2048");
  c.seqs = {{4999, 1}, {30, 1}};
  check_attention(c, 22, "two decode rows, 5000 and 31");
}

TEST(CudaFastPathAttention, PromptChunksMatchSimple) {
  AttentionCase c;
  c.seqs = {{0, 100}};
  check_attention(c, 31, "one prompt of 100");
  c.seqs = {{0, 257}, {50, 37}, {0, kFlashMinQueries}, {9, 1}, {200, 64}, {0, 15}};
  check_attention(c, 32, "mixed prompts, chunks and decode rows");
  c.seqs = {{0, 1024}};
  check_attention(c, 33, "one prompt of 1024");
  c.seqs = {{0, kFlashMinQueries}, {100, 1}, {3000, 1}};  // few rows: decode rows split
  check_attention(c, 34, "a short prompt next to split decode rows");
}

// A served step: decodes first, then a prompt chunk; the decode rows split by their own count
// (3 splits for 31 rows), not the step's 512 rows (which would leave them unsplit).
TEST(CudaFastPathAttention, DecodesBesideAPromptChunkSplitByTheirOwnCount) {
  AttentionCase c;
  for (int i = 0; i < 31; ++i) c.seqs.push_back({2047 - 13 * i, 1});
  c.seqs.push_back({1024, 481});
  check_attention(c, 35, "31 decode rows and a 481-token chunk");
  // A short chunk after a long one: the decode rows reach past the flash rows.
  c.seqs = {{0, 300}, {2000, 1}, {500, 5}, {0, 64}};
  check_attention(c, 36, "decode rows after a prompt chunk");
}

// The Hopper flash kernel copies one box per KV-cache block (8 to 64 positions; 128 takes the
// mma.sync kernel), several to a 128-key tile.
TEST(CudaFastPathAttention, PromptChunksMatchSimpleAtEveryBlockSize) {
  AttentionCase c;
  c.seqs = {{0, 300}, {77, 1}, {200, 129}, {0, kFlashMinQueries}};
  for (int block_size : {8, 32, 64, 128}) {
    c.block_size = block_size;
    const std::string what = "block size " + std::to_string(block_size);
    check_attention(c, 60 + block_size, what.c_str());
  }
}

TEST(CudaFastPathAttention, OtherHeadShapesMatchSimple) {
  AttentionCase c;
  c.seqs = {{0, 130}, {77, 1}, {500, 1}, {31, 40}};
  c.num_heads = 16;  // group 2 (Qwen3-0.6B)
  check_attention(c, 41, "16 heads / 8 kv");
  c.num_heads = 64;  // group 8
  check_attention(c, 42, "64 heads / 8 kv");
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  check_attention(c, 43, "head_dim 64, 8 heads / 2 kv");
  c.block_size = 32;
  check_attention(c, 44, "head_dim 64, block size 32");
  c.num_heads = 6;  // group 3: the flash kernel takes one head per warp
  check_attention(c, 45, "head_dim 64, 6 heads / 2 kv");
  c = AttentionCase{};
  c.seqs = {{0, 130}, {77, 1}, {31, 40}};
  c.num_heads = 24;
  check_attention(c, 46, "24 heads / 8 kv");
  c.block_size = 12;  // not a power of two: kFast runs the simple kernel
  check_attention(c, 47, "block size 12");
}

// A decode-only step with q/k norm + RoPE + the KV write in the decode kernel (AttentionParams::
// rope) against launch_qkv_rope_kv and then the kernel reading q: the same bits in the output
// and in both caches (the new positions written, nothing else touched), for contexts whose new
// position falls at a tile's start, end and middle, in the first, a middle and the last split;
// launch_qkv_rope_kv with four heads per warp gives the same bits as with one. The fused run's q
// buffer is poisoned (NaN), so a read of it would show.
void check_decode_rope(int num_heads, int num_kv_heads, int d, const std::vector<int>& contexts,
                       int splits, uint32_t seed) {
  std::mt19937 rng(seed);
  constexpr int bs = 16;
  const int rows = int(contexts.size());
  int width = 1, max_context = 0;
  for (int c : contexts) width = std::max(width, (c + bs - 1) / bs), max_context = std::max(max_context, c);
  const int num_blocks = rows * width + 3;
  std::vector<int32_t> pool(static_cast<size_t>(num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<int32_t> tables(size_t(rows) * width), token_seq, token_context, query_start;
  std::vector<int32_t> positions, slots;
  for (int s = 0; s < rows; ++s) {
    for (int b = 0; b < width; ++b) tables[size_t(s) * width + b] = pool[size_t(s) * width + b];
    const int position = contexts[size_t(s)] - 1;
    query_start.push_back(s);
    token_seq.push_back(s);
    token_context.push_back(contexts[size_t(s)]);
    positions.push_back(position);
    slots.push_back(tables[size_t(s) * width + position / bs] * bs + position % bs);
  }
  query_start.push_back(rows);
  StepHeader header{};
  header.table_width = width;
  const int columns = (num_heads + 2 * num_kv_heads) * d;
  const size_t kv_elements = size_t(num_blocks) * num_kv_heads * bs * d;
  const std::vector<uint16_t> k0 = random_bf16(kv_elements, rng, 1.0f);
  const std::vector<uint16_t> v0 = random_bf16(kv_elements, rng, 1.0f);
  const std::vector<float> qkv = random_floats(size_t(rows) * columns, rng, 2.0f);
  std::vector<float> q_norm = random_floats(size_t(d), rng, 0.2f), k_norm = q_norm;
  for (float& w : q_norm) w += 1.0f;
  for (float& w : k_norm) w = 2.0f - w;
  std::vector<float> inv_freq(size_t(d / 2));
  for (int i = 0; i < d / 2; ++i) inv_freq[size_t(i)] = std::pow(1e6f, -2.0f * i / d);

  auto upload_floats = [](const std::vector<float>& v) { return upload(v.data(), v.size() * 4); };
  DeviceBuffer dqkv = upload_floats(qkv), dq_norm = upload_floats(q_norm);
  DeviceBuffer dk_norm = upload_floats(k_norm), dfreq = upload_floats(inv_freq);
  DeviceBuffer dheader = upload(&header, sizeof header);
  DeviceBuffer dtables = upload(tables.data(), tables.size() * 4);
  DeviceBuffer dseq = upload(token_seq.data(), token_seq.size() * 4);
  DeviceBuffer dcontext = upload(token_context.data(), token_context.size() * 4);
  DeviceBuffer dstart = upload(query_start.data(), query_start.size() * 4);
  DeviceBuffer dpositions = upload(positions.data(), positions.size() * 4);
  DeviceBuffer dslots = upload(slots.data(), slots.size() * 4);
  DeviceBuffer dk(kv_elements * 2, "K"), dv(kv_elements * 2, "V");
  DeviceBuffer dq(size_t(rows) * num_heads * d * 2, "q");
  const size_t out_elements = size_t(rows) * num_heads * d;
  DeviceBuffer partial_out(out_elements * size_t(splits) * 4, "partials");
  DeviceBuffer partial_lse(size_t(rows) * num_heads * size_t(splits) * 4, "partial lse");
  DeviceBuffer out(out_elements * 2, "attention out");

  QkvRopeParams rope;
  rope.qkv = GemmOutput{dqkv.data(), false, 1, 0};
  rope.q_norm = dq_norm.as<float>();
  rope.k_norm = dk_norm.as<float>();
  rope.eps = 1e-6f;
  rope.inv_freq = dfreq.as<float>();
  rope.positions = dpositions.as<int32_t>();
  rope.slot_mapping = dslots.as<int32_t>();
  rope.tokens = rows;
  rope.num_heads = num_heads;
  rope.num_kv_heads = num_kv_heads;
  rope.head_dim = d;
  rope.block_size = bs;
  rope.q_out = dq.as<bf16>();
  rope.k_cache = dk.as<bf16>();
  rope.v_cache = dv.as<bf16>();
  AttentionParams p;
  p.q = dq.as<bf16>();
  p.k_cache = dk.as<bf16>();
  p.v_cache = dv.as<bf16>();
  p.header = dheader.as<StepHeader>();
  p.block_tables = dtables.as<int32_t>();
  p.token_seq = dseq.as<int32_t>();
  p.token_context = dcontext.as<int32_t>();
  p.seq_query_start = dstart.as<int32_t>();
  p.num_seqs = rows;
  p.rows = rows;
  p.decode_rows = rows;
  p.num_heads = num_heads;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = d;
  p.block_size = bs;
  p.scale = 1.0f / std::sqrt(float(d));
  p.splits = splits;
  p.partial_out = partial_out.as<float>();
  p.partial_lse = partial_lse.as<float>();
  p.out = out.as<bf16>();
  p.sm_count = 132;
  ASSERT_TRUE(decode_attention_applies_rope(p, rope));
  int device = 0, major = 0;
  GPUFRAC_CUDA_CHECK(cudaGetDevice(&device));
  GPUFRAC_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  p.overlap = rope.overlap = major >= 9;
  struct Run {
    std::vector<uint16_t> out, k, v;
  };
  auto run = [&](bool fused) {
    GPUFRAC_CUDA_CHECK(cudaMemcpy(dk.data(), k0.data(), dk.bytes(), cudaMemcpyHostToDevice));
    GPUFRAC_CUDA_CHECK(cudaMemcpy(dv.data(), v0.data(), dv.bytes(), cudaMemcpyHostToDevice));
    GPUFRAC_CUDA_CHECK(cudaMemset(dq.data(), 0xff, dq.bytes()));    // NaN
    GPUFRAC_CUDA_CHECK(cudaMemset(out.data(), 0xff, out.bytes()));  // NaN
    AttentionParams launched = p;
    if (fused) {
      launched.rope = rope;
    } else {
      launch_qkv_rope_kv(rope, nullptr);
    }
    launch_paged_attention(launched, nullptr);
    GPUFRAC_CUDA_CHECK(cudaDeviceSynchronize());
    return Run{download<uint16_t>(out, out_elements), download<uint16_t>(dk, kv_elements),
               download<uint16_t>(dv, kv_elements)};
  };
  const Run separate = run(false), fused = run(true);
  const std::vector<float> values = bf16_to_floats(fused.out);
  EXPECT_TRUE(std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); }))
      << "splits " << splits;
  auto differences = [](const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
    size_t n = 0;
    for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
    return n;
  };
  EXPECT_EQ(differences(fused.out, separate.out), 0u) << "output, splits " << splits;
  EXPECT_EQ(differences(fused.k, separate.k), 0u) << "K cache, splits " << splits;
  EXPECT_EQ(differences(fused.v, separate.v), 0u) << "V cache, splits " << splits;
  EXPECT_GT(differences(separate.k, k0), 0u) << "the new positions were written";
  AttentionParams two_rows = p, two_waves = p;
  two_rows.max_queries = 2;
  EXPECT_FALSE(decode_attention_applies_rope(two_rows, rope));
  two_waves.splits = 396 / (rows * num_kv_heads) + 1;  // 3 decode blocks per SM on 132 SMs
  EXPECT_FALSE(decode_attention_applies_rope(two_waves, rope)) << "a grid past one wave";
}

TEST(CudaFastPathAttention, DecodeKernelAppliesRopeAsTheRopeKernel) {
  const std::vector<int> contexts = {1, 2, 64, 65, 128, 129, 300, 1000, 2048};
  for (int splits : {1, 3, 5}) check_decode_rope(32, 8, 128, contexts, splits, 50 + splits);
  check_decode_rope(32, 8, 128, {2048}, 32, 56);  // batch 1: one 64-key tile per split
  check_decode_rope(32, 8, 128, {1985}, 32, 57);  // the new position alone in the last tile
  check_decode_rope(16, 2, 64, contexts, 5, 60);  // head_dim 64, groups of 8
}

}  // namespace
}  // namespace gpufrac::engine
