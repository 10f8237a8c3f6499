#include "engine/model/weights.h"

#include <cstdlib>
#include <new>
#include <set>
#include <string>

#include "common/error.h"

namespace gpufrac::engine {

void* ModelWeights::allocate(uint64_t bytes) {
  size_t rounded = size_t((bytes + 63) / 64 * 64);
  void* buffer = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (!buffer) {
    throw RuntimeFailure("out of host memory allocating " + std::to_string(bytes) +
                         " bytes for model weights");
  }
  storage.push_back(std::shared_ptr<const void>(buffer, [](const void* p) {
    std::free(const_cast<void*>(p));
  }));
  return buffer;
}

uint64_t ModelWeights::total_bytes() const {
  std::set<const void*> counted;
  uint64_t total = 0;
  auto add = [&](const HostTensor& t) {
    if (!t.empty() && counted.insert(t.data).second) total += t.bytes();
  };
  add(embed_tokens);
  add(final_norm);
  add(lm_head);
  for (const LayerWeights& layer : layers) {
    for (const HostTensor* t : {&layer.input_norm, &layer.qkv_proj, &layer.qkv_bias, &layer.q_norm,
                                &layer.k_norm, &layer.o_proj, &layer.post_attention_norm,
                                &layer.gate_up_proj, &layer.down_proj}) {
      add(*t);
    }
  }
  return total;
}

namespace {

void expect(const HostTensor& tensor, const std::string& name, std::vector<int64_t> shape,
            bool present) {
  if (!present) {
    if (!tensor.empty()) {
      throw RuntimeFailure("model weights: " + name + " is present but the config says the model "
                           "has none");
    }
    return;
  }
  if (tensor.empty()) throw RuntimeFailure("model weights: " + name + " is missing");
  if (tensor.shape != shape) {
    HostTensor wanted{tensor.dtype, shape, nullptr};
    throw RuntimeFailure("model weights: " + name + " has shape " + tensor.shape_string() +
                         ", the config needs " + wanted.shape_string());
  }
}

}  // namespace

void ModelWeights::validate() const {
  const ModelConfig& c = config;
  int64_t hidden = c.hidden_size, vocab = c.vocab_size;
  int64_t qkv = c.q_width() + 2 * int64_t(c.kv_width());
  expect(embed_tokens, "embed_tokens", {vocab, hidden}, true);
  expect(final_norm, "final_norm", {hidden}, true);
  expect(lm_head, "lm_head", {vocab, hidden}, true);
  if (c.tie_word_embeddings && lm_head.data != embed_tokens.data) {
    throw RuntimeFailure("model weights: lm_head must be embed_tokens when tie_word_embeddings");
  }
  if (layers.size() != size_t(c.num_layers)) {
    throw RuntimeFailure("model weights: " + std::to_string(layers.size()) +
                         " layers, the config needs " + std::to_string(c.num_layers));
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerWeights& l = layers[i];
    std::string prefix = "layers." + std::to_string(i) + ".";
    expect(l.input_norm, prefix + "input_norm", {hidden}, true);
    expect(l.qkv_proj, prefix + "qkv_proj", {qkv, hidden}, true);
    expect(l.qkv_bias, prefix + "qkv_bias", {qkv}, c.qkv_bias);
    expect(l.q_norm, prefix + "q_norm", {c.head_dim}, c.qk_norm);
    expect(l.k_norm, prefix + "k_norm", {c.head_dim}, c.qk_norm);
    expect(l.o_proj, prefix + "o_proj", {hidden, c.q_width()}, true);
    expect(l.post_attention_norm, prefix + "post_attention_norm", {hidden}, true);
    expect(l.gate_up_proj, prefix + "gate_up_proj", {2 * int64_t(c.intermediate_size), hidden},
           true);
    expect(l.down_proj, prefix + "down_proj", {hidden, c.intermediate_size}, true);
  }
}

}  // namespace gpufrac::engine
