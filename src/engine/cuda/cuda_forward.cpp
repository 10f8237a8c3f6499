// CudaRunner's forward pass (cuda_runner.h): the linear-kernel choices timed at start-up
// (cuBLASLt's algorithm per shape, the GEMV against cuBLASLt), the layer-by-layer step enqueued on
// the runner's stream (what the decode graphs capture), and the per-stage profile. The runner's
// lifecycle, memory, graphs and submit/collect are in cuda_runner.cpp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "common/clock.h"
#include "common/log.h"
#include "common/strings.h"
#include "engine/cuda/attention.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_runner.h"
#include "engine/cuda/gemv.h"
#include "engine/cuda/gpu_sampler.h"
#include "engine/cuda/gpu_timing.h"
#include "engine/cuda/layer_kernels.h"
#include "engine/cuda/sampling_extras.h"

namespace gpufrac::engine {

namespace {

// The start-up timings' input: `rows` x `width` activations (nothing is live then: the buffer
// serves as scratch), every bf16 0x3c3c (~0.0115): not zeros, which can run faster than real data.
bf16* timing_input(DeviceBuffer& activations, int rows, int width, cudaStream_t stream) {
  GPUFRAC_CUDA_CHECK(
      cudaMemsetAsync(activations.data(), 0x3c, uint64_t(rows) * uint64_t(width) * 2, stream));
  return activations.as<bf16>();
}

std::string one_decimal(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", value);
  return text;
}

}  // namespace

bool CudaRunner::prefers_gemv(int tokens, int n, int k, bool fused_silu) const {
  if (tokens > options_.kernels.gemv_max_tokens) return false;
  auto found = gemv_wins_.find({tokens, n, k, fused_silu});
  return found != gemv_wins_.end() && found->second;
}

void CudaRunner::tune_linear_layers() {
  const ModelConfig& c = weights_.config();
  const int hidden = c.hidden_size, q_width = c.q_width(), inter = c.intermediate_size;
  const int qkv = q_width + 2 * c.kv_width();
  const int most_tokens = options_.max_tokens_per_step;
  const int most_samples = std::min(most_tokens, options_.max_seqs_per_step);
  bf16* x = timing_input(activations_, most_tokens, std::max({hidden, q_width, inter}), stream_);
  // The decode batch sizes (the graphs' buckets), powers of two and the largest step: token
  // counts in between take the nearest one's choice (gemm.h).
  std::set<int> token_counts(buckets_.begin(), buckets_.end());
  for (int m = 1; m < most_tokens; m *= 2) token_counts.insert(m);
  token_counts.insert(most_tokens);
  struct Shape {
    bool per_layer;                    // false: the lm_head
    std::vector<const bf16*> weights;  // one per layer: distinct bytes, as in a step
    int n, k;
    bool y_bf16, accumulate;  // as the forward pass runs it
    void* out;                // holds the most rows x n outputs
    int most_rows;
  };
  std::vector<Shape> shapes = {
      {true, {}, qkv, hidden, false, false, gemm_out_.data(), most_tokens},
      {true, {}, hidden, q_width, false, true, gemm_out_.data(), most_tokens},
      {true, {}, 2 * inter, hidden, true, false, gemm_out_.data(), most_tokens},
      {true, {}, hidden, inter, false, true, gemm_out_.data(), most_tokens},
      {false,
       {weights_.lm_head},
       c.vocab_size,
       hidden,
       false,
       false,
       logits_.data(),
       most_samples}};
  for (const DeviceLayerWeights& l : weights_.layers) {
    shapes[0].weights.push_back(l.qkv_proj);
    shapes[1].weights.push_back(l.o_proj);
    shapes[2].weights.push_back(l.gate_up_proj);
    shapes[3].weights.push_back(l.down_proj);
  }
  const int64_t began = monotonic_ns();
  int tuned = 0, changed = 0;
  double first_ms = 0, best_ms = 0;  // one layer's four shapes at the largest step
  for (const Shape& s : shapes) {
    for (int m : token_counts) {
      if (m > s.most_rows) continue;
      CublasLtGemm::Tuning t =
          gemm_->tune(x, s.weights, s.out, s.y_bf16, m, s.n, s.k, s.accumulate, stream_);
      tuned++;
      if (t.chosen != 0) changed++;
      if (s.per_layer && m == most_tokens) first_ms += t.first_ms, best_ms += t.best_ms;
    }
  }
  log_info("cuda runner: cuBLASLt's candidate algorithms timed for ", tuned, " shapes in ",
           (monotonic_ns() - began) / 1000000, " ms; another than its first kept for ", changed,
           "; at ", most_tokens, " tokens the linear layers take ", one_decimal(best_ms * 1e3),
           " us per layer (its first algorithms: ", one_decimal(first_ms * 1e3), " us)");
}

void CudaRunner::time_linear_kernels() {
  gemv_wins_.clear();
  if (options_.kernels.gemv_max_tokens == 0) return;
  const bool timed = options_.time_linear_choices;
  const ModelConfig& c = weights_.config();
  const int hidden = c.hidden_size, q_width = c.q_width(), inter = c.intermediate_size;
  const int qkv = q_width + 2 * c.kv_width();
  const int most_tokens = std::min(options_.kernels.gemv_max_tokens, options_.max_tokens_per_step);
  bf16* x = timing_input(activations_, most_tokens, std::max({hidden, q_width, inter}), stream_);
  bf16* gated = reinterpret_cast<bf16*>(gemm_out_.as<char>() + silu_offset_bytes_);
  // Call i takes layer i's weights (distinct bytes, as in a step).
  const int layers = int(weights_.layers.size());
  auto time_ms = [&](const std::function<void(int)>& call) {
    return best_ms_per_call(stream_, 10, call);
  };
  struct Shape {
    const bf16* DeviceLayerWeights::*weight;  // null: the lm_head
    int n, k;
    void* out;      // holds most_rows x n floats
    int most_rows;  // the lm_head runs on sampled rows only: at most max_seqs_per_step
  };
  const int most_samples = std::min(most_tokens, options_.max_seqs_per_step);
  void* out = gemm_out_.data();
  const Shape shapes[] = {{&DeviceLayerWeights::qkv_proj, qkv, hidden, out, most_tokens},
                          {&DeviceLayerWeights::o_proj, hidden, q_width, out, most_tokens},
                          {&DeviceLayerWeights::down_proj, hidden, inter, out, most_tokens},
                          {nullptr, c.vocab_size, hidden, logits_.data(), most_samples}};
  auto layer = [&](int i) -> const DeviceLayerWeights& {
    return weights_.layers[size_t(i % layers)];
  };
  for (int m = 1; m <= most_tokens; ++m) {
    for (const Shape& s : shapes) {
      if (m > s.most_rows) continue;
      auto weight = [&](int i) { return s.weight ? layer(i).*s.weight : weights_.lm_head; };
      auto gemv = [&] {
        return time_ms([&](int i) {
          launch_gemv(x, weight(i), s.out, GemvStore::fp32, m, s.n, s.k, stream_, overlap_);
        });
      };
      auto cublas = [&] {
        return time_ms(
            [&](int i) { gemm_->run(x, weight(i), s.out, false, m, s.n, s.k, stream_); });
      };
      gemv_wins_[{m, s.n, s.k, false}] = !timed || gemv() <= cublas();
    }
    auto fused = [&] {
      return time_ms([&](int i) {
        launch_gemv_silu_mul(x, layer(i).gate_up_proj, gated, m, inter, hidden, stream_, overlap_);
      });
    };
    auto separate = [&] {
      return time_ms([&](int i) {
        gemm_->run(x, layer(i).gate_up_proj, gemm_out_.data(), true, m, 2 * inter, hidden, stream_);
        launch_silu_mul(gemm_out_.as<bf16>(), m, inter, gated, stream_);
      });
    };
    gemv_wins_[{m, inter, hidden, true}] = !timed || fused() <= separate();
  }
  if (!timed) return;
  // "6144x2560 m=2-4, 9728x2560+silu m=1-4": the token counts per shape where cuBLASLt won.
  std::map<std::string, std::vector<int>> kept;
  for (const auto& [key, wins] : gemv_wins_) {
    const auto& [tokens, n, k, silu] = key;
    if (wins) continue;
    kept[std::to_string(n) + "x" + std::to_string(k) + (silu ? "+silu" : "")].push_back(tokens);
  }
  std::string summary;
  for (const auto& [shape, tokens] : kept) {
    summary += (summary.empty() ? " " : ", ") + shape + " m=" + format_int_ranges(tokens);
  }
  log_info("cuda runner: GEMV timed against cuBLASLt; cuBLASLt kept for:",
           summary.empty() ? " none" : summary);
}

GemmOutput CudaRunner::linear(const bf16* x, const bf16* w, void* y, int tokens, int n, int k,
                              bool gemm_bf16, const GemvNorm& takes) {
  if (takes.weight || prefers_gemv(tokens, n, k, false)) {
    launch_gemv(x, w, static_cast<float*>(y), GemvStore::fp32, tokens, n, k, stream_, overlap_,
                nullptr, takes.weight ? &takes : nullptr);
    return {y, false, 1, 0};
  }
  gemm_->run(x, w, y, gemm_bf16, tokens, n, k, stream_);
  return {y, gemm_bf16, 1, 0};
}

GemvNorm CudaRunner::add_to_residual(const bf16* x, const bf16* w, int tokens, int n, int k,
                                     const float* next_norm) {
  float* residual = residual_.as<float>();
  if (!prefers_gemv(tokens, n, k, false)) {
    gemm_->run(x, w, residual, false, tokens, n, k, stream_, /*accumulate=*/true);
    return GemvNorm{};
  }
  GemvNorm left;
  if (next_norm) {
    left.weight = next_norm;
    left.rows = gemv_norm_.as<bf16>();
    left.sums = reinterpret_cast<float*>(gemv_norm_.as<char>() + gemv_norm_sums_offset_);
    left.parts = gemv_groups(tokens, n);
    left.eps = float(weights_.config().rms_norm_eps);
  }
  launch_gemv(x, w, residual, GemvStore::add_fp32, tokens, n, k, stream_, overlap_,
              next_norm ? &left : nullptr);
  return left;
}

const bf16* CudaRunner::normed_rows(const GemvNorm& left, const float* norm_weight, int tokens) {
  if (left.weight) return left.rows;
  const ModelConfig& c = weights_.config();
  bf16* act = activations_.as<bf16>();
  launch_rmsnorm(residual_.as<float>(), nullptr, tokens, c.hidden_size, norm_weight,
                 float(c.rms_norm_eps), act, stream_, overlap_);
  mark("rmsnorm");
  return act;
}

// What every layer's attention in a step of `shape` shares (the caches and the q/k norm + RoPE
// are set per layer): the rows, the output `out`, the flash grid's SMs and the decode splits.
AttentionParams CudaRunner::step_attention(const StepShape& shape, const StepArrays& a,
                                           bf16* out) {
  const ModelConfig& c = weights_.config();
  const int tokens = shape.tokens;
  // The rows the decode kernel takes: with the fast kernels only those before the last short
  // sequence (the flash kernel takes the prompt chunks), with the simple kernel every row.
  const bool flash_takes_prompts = runs_fast_attention(options_.kernels.attention, c.num_heads,
                                                       c.num_kv_heads, c.head_dim, block_size_);
  const bool beside_flash = flash_takes_prompts && shape.max_queries >= kFlashMinQueries;
  AttentionParams attn;
  attn.q = queries_.as<bf16>();
  attn.header = a.header;
  attn.block_tables = a.block_tables;
  attn.token_seq = a.token_seq;
  attn.token_context = a.token_context;
  attn.seq_query_start = a.seq_query_start;
  attn.num_seqs = shape.seqs;
  attn.max_queries = shape.max_queries;
  attn.min_queries = shape.min_queries;
  attn.kernels = options_.kernels.attention;
  attn.rows = tokens;
  attn.decode_rows = flash_takes_prompts && shape.decode_rows >= 0 ? shape.decode_rows : tokens;
  attn.first_flash_seq = flash_takes_prompts ? shape.first_flash_seq : 0;
  attn.num_heads = c.num_heads;
  attn.num_kv_heads = c.num_kv_heads;
  attn.head_dim = c.head_dim;
  attn.block_size = block_size_;
  attn.scale = 1.0f / std::sqrt(float(c.head_dim));
  attn.partial_out = attention_partials_.as<float>();
  attn.partial_lse = attention_partials_.as<float>() + partial_floats_;
  attn.out = out;
  attn.overlap = overlap_;
  attn.hopper_flash = options_.kernels.hopper_flash;
  attn.sm_count = sm_count_;
  const int flash_percent = options_.kernels.flash_sm_percent_beside_decodes;
  if (beside_flash && attn.decode_rows > 0 && flash_percent < 100) {
    attn.flash_sms = std::max(1, sm_count_ * flash_percent / 100);
  }
  // SMs the flash kernel's persistent grid holds for the whole attention (0: none, its blocks
  // come and go); the decode blocks plan for the others.
  const int flash_sms = flash_sms_beside_decodes(attn);
  if (flash_sms > 0) attn.beside_flash_exits = beside_flash_exits_.as<int32_t>();
  const bool whole_contexts =
      flash_takes_prompts && shape.max_queries < kFlashMinQueries &&
      decode_streams_whole_contexts(attn.decode_rows, c.num_heads, c.num_kv_heads, sm_count_);
  // The simple kernel keeps its splits: it has no three-stage form.
  attn.splits = whole_contexts ? 1
                               : attention_splits(attn.decode_rows, c.num_heads, c.num_kv_heads,
                                                  sm_count_ - flash_sms, shape.max_context,
                                                  beside_flash && flash_sms == 0);
  return attn;
}

void CudaRunner::enqueue_step(const StepShape& shape, const StepArrays& a) {
  const ModelConfig& c = weights_.config();
  const int tokens = shape.tokens;
  const int hidden = c.hidden_size, q_width = c.q_width(), inter = c.intermediate_size;
  const int qkv = q_width + 2 * c.kv_width();
  const float eps = float(c.rms_norm_eps);
  auto* x = residual_.as<float>();
  auto* act = activations_.as<bf16>();
  const uint64_t layer_kv_elements = uint64_t(kv_.segment_blocks()) * uint64_t(c.num_kv_heads) *
                                     uint64_t(block_size_) * uint64_t(c.head_dim);

  mark("");
  launch_embed(weights_.embed_tokens, a.token_ids, sampled_.as<int32_t>(), tokens, hidden, x,
               stream_);
  mark("embed");
  AttentionParams attn = step_attention(shape, a, act);

  // What the last projection added into the residual left for the next norm (GemvNorm; no
  // weight: the next norm runs as a kernel of its own).
  GemvNorm left;
  for (int l = 0; l < c.num_layers; ++l) {
    const DeviceLayerWeights& w = weights_.layers[size_t(l)];
    bf16* k_cache = static_cast<bf16*>(kv_.data()) + uint64_t(2 * l) * layer_kv_elements;
    bf16* v_cache = k_cache + layer_kv_elements;

    // Steps with prompt tokens take q/k/v in bf16 from cuBLASLt (half the bytes written and
    // read; NOTES.md, version 14); decode-only steps keep fp32 for the decode kernel's RoPE.
    QkvRopeParams rope;
    rope.qkv = linear(normed_rows(left, w.input_norm, tokens), w.qkv_proj, gemm_out_.data(), tokens,
                      qkv, hidden, /*gemm_bf16=*/shape.max_queries > 1, left);
    mark("qkv linear");
    rope.bias = w.qkv_bias;
    rope.q_norm = w.q_norm;
    rope.k_norm = w.k_norm;
    rope.eps = eps;
    rope.inv_freq = inv_freq_.as<float>();
    rope.positions = a.positions;
    rope.slot_mapping = a.slot_mapping;
    rope.tokens = tokens;
    rope.num_heads = c.num_heads;
    rope.num_kv_heads = c.num_kv_heads;
    rope.head_dim = c.head_dim;
    rope.block_size = block_size_;
    rope.q_out = queries_.as<bf16>();
    rope.k_cache = k_cache;
    rope.v_cache = v_cache;
    rope.overlap = overlap_;

    attn.k_cache = k_cache;
    attn.v_cache = v_cache;
    attn.rope = QkvRopeParams{};
    if (decode_attention_applies_rope(attn, rope)) {
      attn.rope = rope;
    } else {
      launch_qkv_rope_kv(rope, stream_);
      mark("q/k norm + rope + kv write");
    }
    launch_paged_attention(attn, stream_);
    mark("attention");

    const bool gate_up_gemv = prefers_gemv(tokens, inter, hidden, true);
    left = add_to_residual(act, w.o_proj, tokens, hidden, q_width,
                           gate_up_gemv ? w.post_attention_norm : nullptr);
    mark("o linear");
    const bf16* normed = normed_rows(left, w.post_attention_norm, tokens);
    const bf16* gated = act;
    if (gate_up_gemv) {
      bf16* silu_out = reinterpret_cast<bf16*>(gemm_out_.as<char>() + silu_offset_bytes_);
      launch_gemv_silu_mul(normed, w.gate_up_proj, silu_out, tokens, inter, hidden, stream_,
                           overlap_, left.weight ? &left : nullptr);
      mark("gate|up linear + silu * mul");
      gated = silu_out;
    } else {
      // cuBLASLt: what the fused GEMV was timed against (time_linear_kernels) and lost to, or
      // a step past the GEMV's token counts.
      gemm_->run(normed, w.gate_up_proj, gemm_out_.data(), true, tokens, 2 * inter, hidden,
                 stream_);
      mark("gate|up linear");
      launch_silu_mul(gemm_out_.as<bf16>(), tokens, inter, act, stream_);
      mark("silu * mul");
    }
    const bool next_qkv_gemv = l + 1 < c.num_layers && prefers_gemv(tokens, qkv, hidden, false);
    left = add_to_residual(gated, w.down_proj, tokens, hidden, inter,
                           next_qkv_gemv ? weights_.layers[size_t(l) + 1].input_norm : nullptr);
    mark("down linear");
  }
  if (shape.samples == 0) return;
  auto* final_hidden = final_hidden_.as<bf16>();
  launch_rmsnorm(x, a.sample_token, shape.samples, hidden, weights_.final_norm, eps, final_hidden,
                 stream_, overlap_);
  mark("rmsnorm");
  linear(final_hidden, weights_.lm_head, logits_.data(), shape.samples, c.vocab_size, hidden,
         /*gemm_bf16=*/false);
  mark("lm_head");
  // Before the sampler, which overwrites the previous step's samples the adjustments read.
  if (shape.adjusts_logits) {
    launch_logit_adjustments(logits_.as<float>(), shape.samples, c.vocab_size, a,
                             sampled_.as<int32_t>(), stream_);
    mark("logit adjustments");
  }
  launch_sampler(logits_.as<float>(), shape.samples, c.vocab_size, a, sampled_.as<int32_t>(),
                 stream_, options_.kernels.split_sampler ? sampler_scratch_.data() : nullptr);
  mark("sampler");
  if (shape.adjusts_logits) {
    launch_restore_logits(logits_.as<float>(), shape.samples, c.vocab_size, a, stream_);
  }
  if (shape.wants_logprobs) {
    launch_logprobs(logits_.as<float>(), shape.samples, c.vocab_size, a, sampled_.as<int32_t>(),
                    logprobs_.as<TokenLogprob>(), stream_);
    mark("logprobs");
  }
}

void CudaRunner::mark(const char* stage) {
  if (!profiling_) return;
  cudaEvent_t event = nullptr;
  GPUFRAC_CUDA_CHECK(cudaEventCreate(&event));
  marks_.emplace_back(stage, event);
  GPUFRAC_CUDA_CHECK(cudaEventRecord(event, stream_));
}

std::vector<std::pair<std::string, double>> CudaRunner::profile_forward(const StepBatch& batch) {
  StepResult result;
  profiling_ = true;
  std::vector<std::pair<std::string, double>> stages;
  try {
    forward(batch, result);
  } catch (...) {
    profiling_ = false;
    for (auto& [stage, event] : marks_) cudaEventDestroy(event);
    marks_.clear();
    throw;
  }
  profiling_ = false;
  for (size_t i = 1; i < marks_.size(); ++i) {
    float ms = 0;
    GPUFRAC_CUDA_CHECK(cudaEventElapsedTime(&ms, marks_[i - 1].second, marks_[i].second));
    std::string name = marks_[i].first;
    auto it = std::find_if(stages.begin(), stages.end(),
                           [&](const auto& entry) { return entry.first == name; });
    if (it == stages.end()) {
      stages.emplace_back(name, ms);
    } else {
      it->second += ms;
    }
  }
  for (auto& [stage, event] : marks_) cudaEventDestroy(event);
  marks_.clear();
  return stages;
}

}  // namespace gpufrac::engine
