// An independent, deliberately plain float64 implementation of the dense decoder forward pass
// (Qwen3 / Qwen2 / Llama 3), written from the Hugging Face modeling code, for checking the CPU
// runner: no paging, no batching, no threads, no fused loops. It reads the same weight values
// (bf16 widened exactly) and recomputes everything else (RoPE frequencies included) itself.
#pragma once

#include <cmath>
#include <numbers>
#include <vector>

#include "engine/model/weights.h"

namespace gpufrac::engine::test_util {

class ReferenceModel {
 public:
  explicit ReferenceModel(const ModelWeights& weights) : w_(weights), c_(weights.config) {
    for (int i = 0; i < c_.head_dim / 2; ++i) {
      double freq = std::pow(c_.rope_theta, -2.0 * i / c_.head_dim);
      if (c_.rope_scaling.factor > 0) freq = llama3_scaled(freq);
      inv_freq_.push_back(freq);
    }
  }

  // Logits [vocab] after each token index in `at`, from one causal pass over `tokens`.
  std::vector<std::vector<double>> logits(const std::vector<int32_t>& tokens,
                                          const std::vector<int>& at) const {
    int n = int(tokens.size()), hidden = c_.hidden_size, hd = c_.head_dim;
    int q_width = c_.q_width(), kv_width = c_.kv_width(), inter = c_.intermediate_size;
    std::vector<std::vector<double>> x(n);
    for (int t = 0; t < n; ++t) x[t] = row(w_.embed_tokens, tokens[t]);
    for (const LayerWeights& l : w_.layers) {
      std::vector<std::vector<double>> q(n), k(n), v(n);
      for (int t = 0; t < n; ++t) {
        std::vector<double> h = norm(x[t], values(l.input_norm));
        std::vector<double> qkv = matvec(l.qkv_proj, h);
        if (c_.qkv_bias) {
          std::vector<double> bias = values(l.qkv_bias);
          for (size_t i = 0; i < qkv.size(); ++i) qkv[i] += bias[i];
        }
        q[t].assign(qkv.begin(), qkv.begin() + q_width);
        k[t].assign(qkv.begin() + q_width, qkv.begin() + q_width + kv_width);
        v[t].assign(qkv.begin() + q_width + kv_width, qkv.end());
        for (int h0 = 0; h0 < q_width; h0 += hd) head_transform(q[t], h0, l.q_norm, t);
        for (int h0 = 0; h0 < kv_width; h0 += hd) head_transform(k[t], h0, l.k_norm, t);
      }
      int group = c_.num_heads / c_.num_kv_heads;
      for (int t = 0; t < n; ++t) {
        std::vector<double> attn(q_width, 0.0);
        for (int head = 0; head < c_.num_heads; ++head) {
          int kv = (head / group) * hd;
          std::vector<double> p(t + 1);
          double max_score = -INFINITY, total = 0;
          for (int s = 0; s <= t; ++s) {
            double score = 0;
            for (int i = 0; i < hd; ++i) score += q[t][head * hd + i] * k[s][kv + i];
            p[s] = score / std::sqrt(double(hd));
            max_score = std::max(max_score, p[s]);
          }
          for (int s = 0; s <= t; ++s) total += p[s] = std::exp(p[s] - max_score);
          for (int s = 0; s <= t; ++s) {
            for (int i = 0; i < hd; ++i) attn[head * hd + i] += p[s] / total * v[s][kv + i];
          }
        }
        std::vector<double> out = matvec(l.o_proj, attn);
        for (int i = 0; i < hidden; ++i) x[t][i] += out[i];
        std::vector<double> h = norm(x[t], values(l.post_attention_norm));
        std::vector<double> gate_up = matvec(l.gate_up_proj, h);
        std::vector<double> act(inter);
        for (int i = 0; i < inter; ++i) {
          double g = gate_up[i];
          act[i] = g / (1 + std::exp(-g)) * gate_up[inter + i];
        }
        std::vector<double> down = matvec(l.down_proj, act);
        for (int i = 0; i < hidden; ++i) x[t][i] += down[i];
      }
    }
    std::vector<std::vector<double>> result;
    for (int t : at) result.push_back(matvec(w_.lm_head, norm(x[t], values(w_.final_norm))));
    return result;
  }

 private:
  static double element(const HostTensor& t, int64_t i) {
    float value;
    convert_to_f32(static_cast<const char*>(t.data) + i * int64_t(dtype_bytes(t.dtype)), t.dtype,
                   &value, 1);
    return value;
  }
  static std::vector<double> values(const HostTensor& t) {
    std::vector<double> out(size_t(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) out[i] = element(t, i);
    return out;
  }
  static std::vector<double> row(const HostTensor& t, int64_t r) {
    std::vector<double> out(size_t(t.cols()));
    for (int64_t i = 0; i < t.cols(); ++i) out[i] = element(t, r * t.cols() + i);
    return out;
  }
  // W x for W [out, in].
  static std::vector<double> matvec(const HostTensor& w, const std::vector<double>& x) {
    std::vector<float> row_f32(size_t(w.cols()));
    std::vector<double> y(size_t(w.rows()));
    for (int64_t r = 0; r < w.rows(); ++r) {
      convert_to_f32(static_cast<const char*>(w.data) + r * w.cols() * dtype_bytes(w.dtype),
                     w.dtype, row_f32.data(), w.cols());
      double sum = 0;
      for (int64_t i = 0; i < w.cols(); ++i) sum += double(row_f32[i]) * x[i];
      y[r] = sum;
    }
    return y;
  }
  std::vector<double> norm(const std::vector<double>& x, const std::vector<double>& weight) const {
    double mean_square = 0;
    for (double value : x) mean_square += value * value / double(x.size());
    std::vector<double> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      out[i] = x[i] / std::sqrt(mean_square + c_.rms_norm_eps) * weight[i];
    }
    return out;
  }
  // Optional per-head RMSNorm, then RoPE (rotate half) at `position`, on head [h0, h0 + hd).
  void head_transform(std::vector<double>& v, int h0, const HostTensor& norm_weight,
                      int position) const {
    int hd = c_.head_dim, half = hd / 2;
    std::vector<double> head(v.begin() + h0, v.begin() + h0 + hd);
    if (c_.qk_norm) head = norm(head, values(norm_weight));
    for (int i = 0; i < half; ++i) {
      double angle = position * inv_freq_[i];
      v[h0 + i] = head[i] * std::cos(angle) - head[i + half] * std::sin(angle);
      v[h0 + i + half] = head[i + half] * std::cos(angle) + head[i] * std::sin(angle);
    }
  }
  double llama3_scaled(double freq) const {
    const RopeScaling& s = c_.rope_scaling;
    double wavelen = 2 * std::numbers::pi / freq;
    if (wavelen < s.original_max_position_embeddings / s.high_freq_factor) return freq;
    if (wavelen > s.original_max_position_embeddings / s.low_freq_factor) return freq / s.factor;
    double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                    (s.high_freq_factor - s.low_freq_factor);
    return (1 - smooth) * freq / s.factor + smooth * freq;
  }

  const ModelWeights& w_;
  const ModelConfig& c_;
  std::vector<double> inv_freq_;
};

// max_i |actual_i - expected_i| / max_i |expected_i|: the error relative to the row's scale.
inline double max_relative_error(const std::vector<float>& actual,
                                 const std::vector<double>& expected) {
  double max_error = 0, scale = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    max_error = std::max(max_error, std::abs(double(actual[i]) - expected[i]));
    scale = std::max(scale, std::abs(expected[i]));
  }
  return max_error / scale;
}

}  // namespace gpufrac::engine::test_util
