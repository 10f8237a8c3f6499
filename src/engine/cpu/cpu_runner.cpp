#include "engine/cpu/cpu_runner.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "common/error.h"
#include "common/thread_pool.h"
#include "common/turn_lock.h"
#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/host_memory.h"
#include "engine/model/kv_chunks.h"
#include "engine/model/sampler.h"
#include "engine/model/synchronous_runner.h"

namespace gpufrac::engine {

namespace {

using cpu::apply_rope;
using cpu::dot;
using cpu::linear;
using cpu::rms_norm;

std::vector<float> to_f32(const HostTensor& tensor) {
  std::vector<float> out(size_t(tensor.numel()));
  if (!tensor.empty()) convert_to_f32(tensor.data, tensor.dtype, out.data(), tensor.numel());
  return out;
}

// The host KV pool: an anonymous mapping, unmapped whole.
struct KvUnmap {
  uint64_t bytes = 0;
  void operator()(float* p) const { munmap(p, bytes); }
};
using KvMapping = std::unique_ptr<float[], KvUnmap>;

class CpuModelRunner final : public SynchronousRunner {
 public:
  CpuModelRunner(ModelWeights weights, int threads, const std::string& turn_lock_path)
      : weights_(std::move(weights)), pool_(threads), turn_lock_(turn_lock_path, "--cpu-turn-lock") {
    const ModelConfig& c = weights_.config;
    inv_freq_ = rope_inverse_frequencies(c);
    final_norm_ = to_f32(weights_.final_norm);
    for (const LayerWeights& layer : weights_.layers) {
      small_.push_back({to_f32(layer.input_norm), to_f32(layer.post_attention_norm),
                        to_f32(layer.q_norm), to_f32(layer.k_norm), to_f32(layer.qkv_bias)});
    }
  }

  const ModelConfig& config() const override { return weights_.config; }
  std::string device_name() const override {
    std::string turns = turn_lock_.path().empty() ? "" : ", taking turns on " + turn_lock_.path();
    return "cpu (" + std::to_string(pool_.size()) + " threads" + turns + ")";
  }
  uint64_t available_memory_bytes() const override { return host_available_memory_bytes(); }

  uint64_t kv_block_bytes(int block_size) const override {
    const ModelConfig& c = weights_.config;
    return uint64_t(c.num_layers) * 2 * uint64_t(block_size) * uint64_t(c.kv_width()) *
           sizeof(float);
  }

  void allocate_kv_cache(int num_blocks, int block_size) override {
    map_kv_pool(num_blocks, block_size, false);
  }
  // Elastic on the host: the pool is mapped without a reservation of memory; pages are taken as
  // blocks fill and given back with MADV_DONTNEED.
  void reserve_kv_cache(int max_blocks, int block_size) override {
    map_kv_pool(max_blocks, block_size, true);
  }
  int back_kv_blocks(int blocks) override {
    backed_blocks_ = std::max<int>(
        backed_blocks_, int(std::min<int64_t>(kv_round_up_to_chunks(blocks, chunk_blocks_),
                                              num_blocks_)));
    return backed_blocks_;
  }
  void release_kv_blocks(int keep_blocks) override {
    const int keep = int(std::min<int64_t>(kv_round_up_to_chunks(keep_blocks, chunk_blocks_),
                                           num_blocks_));
    if (keep >= backed_blocks_) return;
    const uint64_t block_bytes = kv_block_bytes(block_size_) / segments();
    for (int segment = 0; segment < segments(); ++segment) {
      char* start = reinterpret_cast<char*>(kv_slot(segment / 2, segment % 2, keep, 0));
      madvise(start, uint64_t(backed_blocks_ - keep) * block_bytes, MADV_DONTNEED);
    }
    backed_blocks_ = keep;
  }
  int kv_chunk_blocks() const override { return chunk_blocks_; }

  void compute(const StepBatch& batch, StepResult& result) override;

 private:
  struct LayerSmallWeights {  // fp32 copies
    std::vector<float> input_norm, post_attention_norm, q_norm, k_norm, qkv_bias;
  };

  void validate(const StepBatch& batch) const;
  void plan_rows(const StepBatch& batch);
  void attention_block(int layer);
  float* kv_slot(int layer, int kind, int32_t block, int32_t slot) {
    const ModelConfig& c = weights_.config;
    int64_t index = ((int64_t(layer) * 2 + kind) * segment_blocks_ + block) * block_size_ + slot;
    return kv_.get() + index * c.kv_width();
  }
  int segments() const { return 2 * weights_.config.num_layers; }
  // Maps the pool: `num_blocks` per segment, padded to whole chunks; not touched, so pages are
  // taken only as blocks fill. Elastic pools start with no block backed.
  void map_kv_pool(int num_blocks, int block_size, bool elastic) {
    if (num_blocks <= 0 || block_size <= 0) {
      throw RuntimeFailure("allocate_kv_cache: num_blocks and block_size must be positive");
    }
    kv_.reset();
    block_size_ = block_size;
    chunk_blocks_ = engine::kv_chunk_blocks(kv_block_bytes(block_size) / segments(), kKvChunkGranularity);
    segment_blocks_ = kv_round_up_to_chunks(num_blocks, chunk_blocks_);
    const uint64_t bytes = kv_block_bytes(block_size) * uint64_t(segment_blocks_);
    void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (data == MAP_FAILED) {
      throw RuntimeFailure("cannot map the KV cache: " + std::to_string(num_blocks) +
                           " blocks of " + std::to_string(kv_block_bytes(block_size)) + " bytes");
    }
    kv_ = KvMapping(static_cast<float*>(data), KvUnmap{bytes});
    num_blocks_ = num_blocks;
    backed_blocks_ = elastic ? 0 : num_blocks;
  }

  // The host KV pool's chunk: a segment's run of blocks in multiples of 64 KiB.
  static constexpr uint64_t kKvChunkGranularity = 64 << 10;

  ModelWeights weights_;
  ThreadPool pool_;
  TurnLock turn_lock_;
  std::vector<double> inv_freq_;
  std::vector<float> final_norm_;
  std::vector<LayerSmallWeights> small_;
  KvMapping kv_;
  int num_blocks_ = 0;
  int block_size_ = 0;
  int64_t segment_blocks_ = 0;  // num_blocks_ padded to whole chunks: one segment's length
  int chunk_blocks_ = 1;
  int backed_blocks_ = 0;

  // Per step, reused: the sequence and position of each fed token, and the activations.
  const StepBatch* batch_ = nullptr;
  std::vector<int32_t> row_sequence_, row_position_;
  std::vector<float> rope_;  // [rows, head_dim]: cos | sin of each row's angles
  std::vector<float> x_, h_, qkv_, attn_, gate_up_, act_;
};

void CpuModelRunner::validate(const StepBatch& batch) const {
  const ModelConfig& c = weights_.config;
  if (!kv_) throw RuntimeFailure("forward() before allocate_kv_cache()");
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const SequenceWork& work = batch.sequences[s];
    std::string where = "forward: sequence " + std::to_string(s) + ": ";
    if (work.tokens.empty()) throw RuntimeFailure(where + "no tokens");
    if (work.start_position < 0) throw RuntimeFailure(where + "negative start_position");
    int64_t end = int64_t(work.start_position) + int64_t(work.tokens.size());
    if (int64_t(work.block_table.size()) * block_size_ < end) {
      throw RuntimeFailure(where + "block_table covers " +
                           std::to_string(work.block_table.size() * block_size_) +
                           " positions, the step needs " + std::to_string(end));
    }
    for (int32_t block : work.block_table.first(size_t((end + block_size_ - 1) / block_size_))) {
      if (block < 0 || block >= num_blocks_) {
        throw RuntimeFailure(where + "block id " + std::to_string(block) + " outside [0, " +
                             std::to_string(num_blocks_) + ")");
      }
    }
    for (int32_t token : work.tokens) {
      if (token < 0 || token >= c.vocab_size) {
        throw RuntimeFailure(where + "token id " + std::to_string(token) + " outside [0, " +
                             std::to_string(c.vocab_size) + ")");
      }
    }
  }
}

void CpuModelRunner::plan_rows(const StepBatch& batch) {
  const ModelConfig& c = weights_.config;
  row_sequence_.clear();
  row_position_.clear();
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const SequenceWork& work = batch.sequences[s];
    for (size_t i = 0; i < work.tokens.size(); ++i) {
      row_sequence_.push_back(int32_t(s));
      row_position_.push_back(work.start_position + int32_t(i));
    }
  }
  int64_t rows = int64_t(row_sequence_.size()), half = c.head_dim / 2;
  rope_.resize(size_t(rows * c.head_dim));
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      double angle = double(row_position_[t]) * inv_freq_[i];
      rope_[t * c.head_dim + i] = float(std::cos(angle));
      rope_[t * c.head_dim + half + i] = float(std::sin(angle));
    }
  }
}

// qkv_ -> q/k norm, RoPE, K/V into the cache, causal attention -> attn_.
void CpuModelRunner::attention_block(int layer) {
  const ModelConfig& c = weights_.config;
  const LayerSmallWeights& small = small_[layer];
  int64_t rows = int64_t(row_sequence_.size());
  int64_t hd = c.head_dim, qkv_width = c.q_width() + 2 * int64_t(c.kv_width());
  int group = c.num_heads / c.num_kv_heads;

  pool_.parallel_for(rows, 8, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* q = qkv_.data() + t * qkv_width;
      float* k = q + c.q_width();
      float* v = k + c.kv_width();
      const float* cos_sin = rope_.data() + t * hd;
      for (int h = 0; h < c.num_heads; ++h) {
        if (c.qk_norm) rms_norm(q + h * hd, small.q_norm.data(), hd, c.rms_norm_eps, q + h * hd);
        apply_rope(q + h * hd, cos_sin, hd);
      }
      for (int h = 0; h < c.num_kv_heads; ++h) {
        if (c.qk_norm) rms_norm(k + h * hd, small.k_norm.data(), hd, c.rms_norm_eps, k + h * hd);
        apply_rope(k + h * hd, cos_sin, hd);
      }
      const SequenceWork& work = batch_->sequences[row_sequence_[t]];
      int32_t position = row_position_[t];
      int32_t block = work.block_table[position / block_size_], slot = position % block_size_;
      std::copy(k, k + c.kv_width(), kv_slot(layer, 0, block, slot));
      std::copy(v, v + c.kv_width(), kv_slot(layer, 1, block, slot));
    }
  });

  float scale = 1.0f / std::sqrt(float(hd));
  pool_.parallel_for(rows * c.num_heads, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scores;
    for (int64_t task = begin; task < end; ++task) {
      int64_t t = task / c.num_heads;
      int h = int(task % c.num_heads), kv_head = h / group;
      const SequenceWork& work = batch_->sequences[row_sequence_[t]];
      int32_t length = row_position_[t] + 1;  // causal: positions [0, position]
      const float* q = qkv_.data() + t * qkv_width + h * hd;
      scores.resize(size_t(length));
      float max_score = -INFINITY;
      for (int32_t p = 0; p < length; ++p) {
        const float* k =
            kv_slot(layer, 0, work.block_table[p / block_size_], p % block_size_) + kv_head * hd;
        scores[p] = dot(q, k, hd) * scale;
        max_score = std::max(max_score, scores[p]);
      }
      float total = 0;
      for (int32_t p = 0; p < length; ++p) {
        scores[p] = std::exp(scores[p] - max_score);
        total += scores[p];
      }
      float* out = attn_.data() + t * c.q_width() + h * hd;
      std::fill(out, out + hd, 0.0f);
      for (int32_t p = 0; p < length; ++p) {
        const float* v =
            kv_slot(layer, 1, work.block_table[p / block_size_], p % block_size_) + kv_head * hd;
        float weight = scores[p] / total;
        for (int64_t i = 0; i < hd; ++i) out[i] += weight * v[i];
      }
    }
  });
}

void CpuModelRunner::compute(const StepBatch& batch, StepResult& result) {
  validate(batch);
  result.next_tokens.clear();
  result.logits.clear();
  if (batch.sequences.empty()) return;
  TurnLock::Turn turn = turn_lock_.take();
  const ModelConfig& c = weights_.config;
  batch_ = &batch;
  plan_rows(batch);
  int64_t rows = int64_t(row_sequence_.size()), hidden = c.hidden_size;
  int64_t qkv_width = c.q_width() + 2 * int64_t(c.kv_width()), inter = c.intermediate_size;
  x_.resize(size_t(rows * hidden));
  h_.resize(size_t(rows * hidden));
  qkv_.resize(size_t(rows * qkv_width));
  attn_.resize(size_t(rows * c.q_width()));
  gate_up_.resize(size_t(rows * 2 * inter));
  act_.resize(size_t(rows * inter));

  std::vector<int32_t> row_token;
  for (const SequenceWork& work : batch.sequences) {
    row_token.insert(row_token.end(), work.tokens.begin(), work.tokens.end());
  }
  const auto* embed = static_cast<const unsigned char*>(weights_.embed_tokens.data);
  size_t embed_row_bytes = size_t(hidden) * dtype_bytes(weights_.embed_tokens.dtype);
  for (int64_t t = 0; t < rows; ++t) {
    convert_to_f32(embed + size_t(row_token[t]) * embed_row_bytes, weights_.embed_tokens.dtype,
                   x_.data() + t * hidden, hidden);
  }

  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& w = weights_.layers[l];
    const LayerSmallWeights& small = small_[l];
    for (int64_t t = 0; t < rows; ++t) {
      rms_norm(x_.data() + t * hidden, small.input_norm.data(), hidden, c.rms_norm_eps,
               h_.data() + t * hidden);
    }
    linear(pool_, h_.data(), rows, w.qkv_proj, c.qkv_bias ? small.qkv_bias.data() : nullptr,
           qkv_.data(), false);
    attention_block(l);
    linear(pool_, attn_.data(), rows, w.o_proj, nullptr, x_.data(), true);

    for (int64_t t = 0; t < rows; ++t) {
      rms_norm(x_.data() + t * hidden, small.post_attention_norm.data(), hidden, c.rms_norm_eps,
               h_.data() + t * hidden);
    }
    linear(pool_, h_.data(), rows, w.gate_up_proj, nullptr, gate_up_.data(), false);
    pool_.parallel_for(rows, 16, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const float* gate = gate_up_.data() + t * 2 * inter;
        const float* up = gate + inter;
        float* out = act_.data() + t * inter;
        for (int64_t i = 0; i < inter; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
      }
    });
    linear(pool_, act_.data(), rows, w.down_proj, nullptr, x_.data(), true);
  }

  // Final norm and logits for the last fed token of each sequence that samples.
  std::vector<const SequenceWork*> sampled;
  std::vector<float> last_hidden;
  int64_t row_end = 0;
  for (const SequenceWork& work : batch.sequences) {
    row_end += int64_t(work.tokens.size());
    if (!work.sample) continue;
    sampled.push_back(&work);
    last_hidden.resize(last_hidden.size() + size_t(hidden));
    rms_norm(x_.data() + (row_end - 1) * hidden, final_norm_.data(), hidden, c.rms_norm_eps,
             last_hidden.data() + last_hidden.size() - hidden);
  }
  int64_t vocab = c.vocab_size, num_sampled = int64_t(sampled.size());
  result.next_tokens.assign(size_t(num_sampled), -1);
  const bool any_logprobs = std::any_of(sampled.begin(), sampled.end(), [](const SequenceWork* w) {
    return w->sampling.logprobs >= 0;
  });
  result.logprobs.assign(any_logprobs ? size_t(num_sampled) * kLogprobsStride : 0, {});
  if (num_sampled > 0) {
    std::vector<float>& logits = result.logits;
    logits.resize(size_t(num_sampled * vocab));
    linear(pool_, last_hidden.data(), num_sampled, weights_.lm_head, nullptr, logits.data(), false);
    pool_.parallel_for(num_sampled, 1, [&](int64_t begin, int64_t end) {
      for (int64_t s = begin; s < end; ++s) {
        std::span<const float> row(logits.data() + s * vocab, size_t(vocab));
        const SamplingParams& params = sampled[s]->sampling;
        result.next_tokens[s] = sample_token(row, params);
        if (params.logprobs < 0) continue;
        token_logprobs(
            row, result.next_tokens[s], std::min(params.logprobs, kMaxTopLogprobs),
            std::span(result.logprobs).subspan(size_t(s) * kLogprobsStride, kLogprobsStride));
      }
    });
  }
  if (!batch.return_logits) result.logits.clear();
  batch_ = nullptr;
}

}  // namespace

std::unique_ptr<ModelRunner> make_cpu_runner(ModelWeights weights, int threads,
                                             const std::string& turn_lock_path) {
  return std::make_unique<CpuModelRunner>(std::move(weights), threads, turn_lock_path);
}

}  // namespace gpufrac::engine
