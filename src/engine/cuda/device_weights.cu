#include "engine/cuda/device_weights.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>

#include "common/error.h"
#include "common/seeded_random.h"
#include "engine/cuda/cuda_check.h"

namespace gpufrac::engine {

namespace {

// --- The preset generator of presets.cpp, reproduced bit for bit -------------------------------
// Element i of tensor `name` is bf16(offset + scale * z), z from splitmix64(key + i) with
// key = splitmix64(seed ^ fnv1a(name)). Every float operation below is written out with
// round-to-nearest intrinsics in the host's order, so the device never fuses a multiply-add the
// host did not.
constexpr float kRandomMean = 2 * 65535.0f;       // of the sum of four 16-bit uniforms
constexpr float kRandomInvStd = 1.0f / 37837.2f;  // 1 / its standard deviation
constexpr float kMatrixScale = 0.02f;
constexpr float kNormScale = 0.1f;

template <typename T>
__device__ inline T from_bf16(bf16 value);
template <>
__device__ inline bf16 from_bf16<bf16>(bf16 value) { return value; }
template <>
__device__ inline float from_bf16<float>(bf16 value) { return __bfloat162float(value); }

template <typename T>
__global__ void fill_random_kernel(T* out, int64_t count, uint64_t key, float offset, float scale) {
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    uint64_t r = splitmix64(key + uint64_t(i));
    float sum = __fadd_rn(__fadd_rn(__fadd_rn(float(r & 0xffff), float((r >> 16) & 0xffff)),
                                    float((r >> 32) & 0xffff)),
                          float(r >> 48));
    float value =
        __fadd_rn(offset, __fmul_rn(__fmul_rn(scale, __fsub_rn(sum, kRandomMean)), kRandomInvStd));
    out[i] = from_bf16<T>(__float2bfloat16_rn(value));
  }
}

// --- The layout: one slot per tensor -----------------------------------------------------------
struct Slot {
  std::string name;  // presets.cpp's tensor name: the generator's key
  int64_t count = 0;
  bool matrix = true;  // bf16 on the device; otherwise fp32
  float random_offset = 0;
  float random_scale = kMatrixScale;
  const HostTensor* host = nullptr;
  uint64_t offset = 0;  // bytes into the device buffer
  std::function<void(void*)> assign;
};

// Lists every tensor of `config` (and where its device pointer goes in `out`); `host` may be
// null (generation).
std::vector<Slot> plan_slots(const ModelConfig& c, const ModelWeights* host, DeviceWeights& out) {
  std::vector<Slot> slots;
  auto matrix = [&](std::string name, int64_t count, const HostTensor* tensor, const bf16** field) {
    slots.push_back({std::move(name), count, true, 0, kMatrixScale, tensor, 0,
                     [field](void* p) { *field = static_cast<const bf16*>(p); }});
  };
  auto vector = [&](std::string name, int64_t count, bool norm, const HostTensor* tensor,
                    const float** field) {
    slots.push_back({std::move(name), count, false, norm ? 1.0f : 0.0f,
                     norm ? kNormScale : kMatrixScale, tensor, 0,
                     [field](void* p) { *field = static_cast<const float*>(p); }});
  };
  int64_t hidden = c.hidden_size, vocab = c.vocab_size, inter = c.intermediate_size;
  int64_t qkv = c.q_width() + 2 * int64_t(c.kv_width());
  matrix("embed_tokens", vocab * hidden, host ? &host->embed_tokens : nullptr, &out.embed_tokens);
  vector("final_norm", hidden, true, host ? &host->final_norm : nullptr, &out.final_norm);
  if (!c.tie_word_embeddings) {
    matrix("lm_head", vocab * hidden, host ? &host->lm_head : nullptr, &out.lm_head);
  }
  out.layers.assign(size_t(c.num_layers), DeviceLayerWeights{});
  for (int i = 0; i < c.num_layers; ++i) {
    std::string p = "layers." + std::to_string(i) + ".";
    const LayerWeights* h = host ? &host->layers[size_t(i)] : nullptr;
    DeviceLayerWeights& d = out.layers[size_t(i)];
    vector(p + "input_norm", hidden, true, h ? &h->input_norm : nullptr, &d.input_norm);
    matrix(p + "qkv_proj", qkv * hidden, h ? &h->qkv_proj : nullptr, &d.qkv_proj);
    if (c.qkv_bias) vector(p + "qkv_bias", qkv, false, h ? &h->qkv_bias : nullptr, &d.qkv_bias);
    if (c.qk_norm) {
      vector(p + "q_norm", c.head_dim, true, h ? &h->q_norm : nullptr, &d.q_norm);
      vector(p + "k_norm", c.head_dim, true, h ? &h->k_norm : nullptr, &d.k_norm);
    }
    matrix(p + "o_proj", hidden * c.q_width(), h ? &h->o_proj : nullptr, &d.o_proj);
    vector(p + "post_attention_norm", hidden, true, h ? &h->post_attention_norm : nullptr,
           &d.post_attention_norm);
    matrix(p + "gate_up_proj", 2 * inter * hidden, h ? &h->gate_up_proj : nullptr,
           &d.gate_up_proj);
    matrix(p + "down_proj", hidden * inter, h ? &h->down_proj : nullptr, &d.down_proj);
  }
  uint64_t offset = 0;
  for (Slot& slot : slots) {
    slot.offset = offset;
    offset += align_up_256(uint64_t(slot.count) * (slot.matrix ? 2 : 4));
  }
  return slots;
}

uint64_t slots_bytes(const std::vector<Slot>& slots) {
  const Slot& last = slots.back();
  return align_up_256(last.offset + uint64_t(last.count) * (last.matrix ? 2 : 4));
}

// Copies host tensors to the device through two page-locked staging buffers, converting each
// chunk to the device dtype on the way (a plain memcpy for bf16 matrices).
class StagedUploader {
 public:
  StagedUploader() : stream_(nullptr) {
    GPUFRAC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    for (Stage& stage : stages_) {
      stage.buffer = PinnedBuffer(kStageBytes, "weight upload staging");
      GPUFRAC_CUDA_CHECK(cudaEventCreateWithFlags(&stage.done, cudaEventDisableTiming));
    }
  }
  ~StagedUploader() {
    cudaStreamSynchronize(stream_);
    for (Stage& stage : stages_) cudaEventDestroy(stage.done);
    cudaStreamDestroy(stream_);
  }

  void copy(const HostTensor& tensor, DType device_dtype, void* device) {
    size_t out_size = dtype_bytes(device_dtype), in_size = dtype_bytes(tensor.dtype);
    int64_t per_chunk = int64_t(kStageBytes / out_size);
    const auto* src = static_cast<const unsigned char*>(tensor.data);
    auto* dst = static_cast<unsigned char*>(device);
    for (int64_t begin = 0; begin < tensor.numel(); begin += per_chunk) {
      int64_t count = std::min(per_chunk, tensor.numel() - begin);
      Stage& stage = stages_[next_];
      next_ = (next_ + 1) % 2;
      GPUFRAC_CUDA_CHECK(cudaEventSynchronize(stage.done));  // its previous copy has finished
      if (tensor.dtype == device_dtype) {
        std::memcpy(stage.buffer.data(), src + uint64_t(begin) * in_size, uint64_t(count) * in_size);
      } else {
        convert_elements(src + uint64_t(begin) * in_size, tensor.dtype, stage.buffer.data(),
                         device_dtype, count);
      }
      GPUFRAC_CUDA_CHECK(cudaMemcpyAsync(dst + uint64_t(begin) * out_size, stage.buffer.data(),
                                         uint64_t(count) * out_size, cudaMemcpyHostToDevice,
                                         stream_));
      GPUFRAC_CUDA_CHECK(cudaEventRecord(stage.done, stream_));
    }
  }

  void finish() { GPUFRAC_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  static constexpr uint64_t kStageBytes = 32ull << 20;
  struct Stage {
    PinnedBuffer buffer;
    cudaEvent_t done = nullptr;
  };
  cudaStream_t stream_;
  Stage stages_[2];
  int next_ = 0;
};

}  // namespace

DeviceWeights DeviceWeights::upload(const ModelWeights& weights) {
  weights.validate();
  DeviceWeights out;
  out.config_ = weights.config;
  std::vector<Slot> slots = plan_slots(weights.config, &weights, out);
  out.buffer_ = DeviceBuffer(slots_bytes(slots), "the weights of " + weights.config.name);
  auto* base = out.buffer_.as<unsigned char>();
  StagedUploader uploader;
  for (Slot& slot : slots) {
    slot.assign(base + slot.offset);
    if (slot.host->numel() != slot.count) {
      throw RuntimeFailure("weights upload: " + slot.name + " has " +
                           std::to_string(slot.host->numel()) + " elements, expected " +
                           std::to_string(slot.count));
    }
    uploader.copy(*slot.host, slot.matrix ? DType::kBF16 : DType::kF32, base + slot.offset);
  }
  uploader.finish();
  if (weights.config.tie_word_embeddings) out.lm_head = out.embed_tokens;
  return out;
}

DeviceWeights DeviceWeights::generate(const ModelConfig& config, uint64_t seed) {
  DeviceWeights out;
  out.config_ = config;
  std::vector<Slot> slots = plan_slots(config, nullptr, out);
  out.buffer_ = DeviceBuffer(slots_bytes(slots), "the weights of " + config.name);
  auto* base = out.buffer_.as<unsigned char>();
  for (Slot& slot : slots) {
    slot.assign(base + slot.offset);
    uint64_t key = splitmix64(seed ^ fnv1a(slot.name));
    int blocks = int(std::min<int64_t>((slot.count + 255) / 256, 4096));
    if (slot.matrix) {
      fill_random_kernel<<<blocks, 256>>>(reinterpret_cast<bf16*>(base + slot.offset), slot.count,
                                          key, slot.random_offset, slot.random_scale);
    } else {
      fill_random_kernel<<<blocks, 256>>>(reinterpret_cast<float*>(base + slot.offset),
                                          slot.count, key, slot.random_offset, slot.random_scale);
    }
    GPUFRAC_LAUNCH_CHECK();
  }
  GPUFRAC_CUDA_CHECK(cudaDeviceSynchronize());
  if (config.tie_word_embeddings) out.lm_head = out.embed_tokens;
  return out;
}

}  // namespace gpufrac::engine
