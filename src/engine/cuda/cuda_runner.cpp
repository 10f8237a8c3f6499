#include "engine/cuda/cuda_runner.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

#include "common/error.h"
#include "common/log.h"
#include "common/strings.h"
#include "engine/cuda/attention.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_runner_factory.h"
#include "engine/cuda/gemv.h"
#include "engine/cuda/gpu_sampler.h"
#include "engine/cuda/gpu_timing.h"
#include "engine/cuda/layer_kernels.h"
#include "engine/model/model_loader.h"
#include "engine/model/presets.h"

namespace gpufrac::engine {

namespace {

// Free memory kept back from the KV pool for what is allocated after it is sized: the decode
// graphs, the sampling extras' buffers, driver allocations (a few MiB on the H200, measured by
// tests/gpu/density/census).
constexpr uint64_t kReserveBytes = 64ull << 20;
constexpr int kBucketCandidates[] = {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256};

void check_supported(const ModelConfig& c) {
  if (!head_dim_supported(c.head_dim)) {
    throw UsageError("model " + c.name + ": head_dim " + std::to_string(c.head_dim) +
                     " is not supported by the CUDA runner (32, 64, 128 or 256)");
  }
  if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0) {
    throw UsageError("model " + c.name +
                     ": num_attention_heads must be a multiple of "
                     "num_key_value_heads");
  }
  for (int size : {c.hidden_size, c.q_width(), c.intermediate_size}) {
    if (size % 8 != 0) {
      throw UsageError("model " + c.name +
                       ": the CUDA runner needs hidden, q and intermediate "
                       "sizes that are multiples of 8");
    }
  }
}

}  // namespace

CudaKernelChoice CudaKernelChoice::from_environment() {
  const char* simple_env = std::getenv("GPUFRAC_CUDA_SIMPLE");
  if (simple_env != nullptr && std::string(simple_env) == "1") return simple();
  return {};
}

std::string CudaKernelChoice::describe() const {
  std::string text = attention == AttentionKernels::kFast ? "fast attention" : "simple attention";
  if (gemv_max_tokens > 0) {
    text += ", GEMV up to " + std::to_string(gemv_max_tokens) + " tokens";
  } else {
    text += ", cuBLASLt only";
  }
  if (overlap_launches) text += ", overlapped launches";
  if (split_sampler) text += ", split sampler";
  if (attention == AttentionKernels::kFast && hopper_flash) text += ", Hopper flash";
  if (flash_sm_percent_beside_decodes < 100) {
    text += ", flash beside decodes on " + std::to_string(flash_sm_percent_beside_decodes) +
            "% of the SMs";
  }
  return text;
}

CudaRunner::CudaRunner(DeviceWeights weights, const CudaRunnerOptions& options)
    : weights_(std::move(weights)),
      options_(options),
      kv_map_lock_(options.kv_map_lock, "--kv-map-lock") {
  const ModelConfig& c = weights_.config();
  check_supported(c);
  if (options_.max_model_len <= 0) options_.max_model_len = c.max_position_embeddings;
  if (options_.max_model_len <= 0 || options_.max_tokens_per_step <= 0 ||
      options_.max_seqs_per_step <= 0) {
    throw UsageError(
        "CUDA runner: max_model_len, max_tokens_per_step and max_seqs_per_step must "
        "be positive");
  }
  GPUFRAC_CUDA_CHECK(cudaGetDevice(&device_));
  GPUFRAC_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device_));
  cudaDeviceProp props{};
  GPUFRAC_CUDA_CHECK(cudaGetDeviceProperties(&props, device_));
  compute_major_ = props.major;
  device_label_ = "cuda:" + std::to_string(device_) + " (" + props.name + ", " +
                  std::to_string(sm_count_) + " SMs usable, " + format_bytes(props.totalGlobalMem) +
                  ")";
  GPUFRAC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  gemm_ = std::make_unique<CublasLtGemm>();

  const int64_t tokens = options_.max_tokens_per_step, seqs = options_.max_seqs_per_step;
  const int64_t hidden = c.hidden_size, q_width = c.q_width(), inter = c.intermediate_size;
  const int64_t qkv = q_width + 2 * int64_t(c.kv_width());
  residual_ = DeviceBuffer(uint64_t(tokens * hidden * 4), "the residual stream");
  activations_ =
      DeviceBuffer(uint64_t(tokens * std::max({hidden, q_width, inter}) * 2), "activations");
  queries_ = DeviceBuffer(uint64_t(tokens * q_width * 2), "attention queries");
  // The fused gate|up GEMV of a decode step writes its bf16 output past the down projection's
  // fp32 output (silu_offset_bytes_), which the down GEMV then reads.
  silu_offset_bytes_ = uint64_t((kGemvMaxTokens * hidden * 4 + 255) / 256 * 256);
  gemm_out_ =
      DeviceBuffer(uint64_t(std::max({tokens * qkv * 4, tokens * 2 * inter * 2, tokens * hidden * 4,
                                      int64_t(silu_offset_bytes_) + kGemvMaxTokens * inter * 2})),
                   "GEMM outputs");
  gemv_norm_sums_offset_ = uint64_t((kGemvMaxTokens * hidden * 2 + 255) / 256 * 256);
  gemv_norm_ =
      DeviceBuffer(gemv_norm_sums_offset_ + uint64_t(kGemvMaxTokens * ((hidden + 3) / 4) * 4),
                   "GEMV norm hand-off");
  partial_floats_ = attention_partial_floats(c.num_heads, c.num_kv_heads, c.head_dim, sm_count_);
  attention_partials_ = DeviceBuffer(
      uint64_t(std::max<int64_t>(partial_floats_ + partial_floats_ / c.head_dim, 1) * 4),
      "attention split partials");
  beside_flash_exits_ = DeviceBuffer(4, "attention exit counter");
  GPUFRAC_CUDA_CHECK(cudaMemset(beside_flash_exits_.data(), 0, 4));
  final_hidden_ = DeviceBuffer(uint64_t(seqs * hidden * 2), "final hidden states");
  logits_ = DeviceBuffer(uint64_t(seqs * c.vocab_size * 4), "logits");
  sampler_scratch_ = DeviceBuffer(sampler_split_scratch_bytes(int(seqs)), "sampler scratch");
  sampled_ = DeviceBuffer(uint64_t(seqs * 4), "sampled ids");
  const uint64_t logprob_bytes = uint64_t(seqs) * kLogprobsStride * sizeof(TokenLogprob);
  logprobs_ = DeviceBuffer(logprob_bytes, "logprobs");
  for (StepSlot& slot : slots_) {
    slot.ids = PinnedBuffer(uint64_t(seqs * 4), "sampled ids");
    slot.logprobs = PinnedBuffer(logprob_bytes, "logprobs");
    GPUFRAC_CUDA_CHECK(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming));
  }

  std::vector<double> inv_freq = rope_inverse_frequencies(c);
  std::vector<float> inv_freq_f32(inv_freq.begin(), inv_freq.end());
  inv_freq_ = DeviceBuffer(inv_freq_f32.size() * 4, "RoPE frequencies");
  GPUFRAC_CUDA_CHECK(cudaMemcpy(inv_freq_.data(), inv_freq_f32.data(), inv_freq_f32.size() * 4,
                                cudaMemcpyHostToDevice));

  options_.kernels.gemv_max_tokens =
      std::clamp(options_.kernels.gemv_max_tokens, 0, kGemvMaxTokens);
  int largest = std::min(options_.max_seqs_per_step, options_.max_tokens_per_step);
  for (int b : kBucketCandidates) {
    if (b <= largest) buckets_.push_back(b);
  }
  choose_launch_overlap();
  tune_linear_layers();
  time_linear_kernels();
  log_info("cuda runner: ", c.name, " on ", device_label_, ", weights ",
           format_bytes(weights_.bytes()), ", ", format_bytes(available_memory_bytes()),
           " left for the KV cache; ", options_.kernels.describe(),
           overlap_ || !options_.kernels.overlap_launches ? "" : " (not supported here: off)");
}

CudaRunner::~CudaRunner() {
  if (stream_) cudaStreamSynchronize(stream_);
  destroy_graphs();
  for (StepSlot& slot : slots_) {
    if (slot.done) cudaEventDestroy(slot.done);
  }
  if (stream_) cudaStreamDestroy(stream_);
}

std::string CudaRunner::device_name() const {
  return device_label_;
}

uint64_t CudaRunner::available_memory_bytes() const {
  DeviceMemoryInfo info = device_memory_info();
  return info.free_bytes > kReserveBytes ? info.free_bytes - kReserveBytes : 0;
}

uint64_t CudaRunner::kv_block_bytes(int block_size) const {
  const ModelConfig& c = weights_.config();
  return uint64_t(c.num_layers) * 2 * uint64_t(block_size) * uint64_t(c.kv_width()) * 2;
}

void CudaRunner::allocate_kv_cache(int num_blocks, int block_size) {
  set_up_kv_cache(num_blocks, block_size, false);
}

void CudaRunner::reserve_kv_cache(int max_blocks, int block_size) {
  set_up_kv_cache(max_blocks, block_size, true);
}

int CudaRunner::back_kv_blocks(int blocks) {
  // Another engine on the GPU is mapping: the free memory kv_.back() checks is not settled yet.
  std::optional<TurnLock::Turn> turn = kv_map_lock_.try_take();
  if (!turn) return kv_.backed_blocks();
  // Called from the engine's thread: the driver's calls need the device's context current there.
  GPUFRAC_CUDA_CHECK(cudaSetDevice(device_));
  return kv_.back(blocks, stream_);
}

void CudaRunner::release_kv_blocks(int keep_blocks) {
  GPUFRAC_CUDA_CHECK(cudaSetDevice(device_));
  // Steps in flight may still read blocks past keep_blocks that were freed after they started.
  GPUFRAC_CUDA_CHECK(cudaStreamSynchronize(stream_));
  kv_.release(keep_blocks);
}

void CudaRunner::set_up_kv_cache(int num_blocks, int block_size, bool elastic) {
  if (num_blocks <= 0 || block_size <= 0) {
    throw RuntimeFailure("allocate_kv_cache: num_blocks and block_size must be positive");
  }
  if (outstanding_ > 0) throw std::logic_error("allocate_kv_cache while steps are outstanding");
  GPUFRAC_CUDA_CHECK(cudaStreamSynchronize(stream_));
  previous_samples_ = 0;  // the graphs' warm-up runs overwrite sampled_
  destroy_graphs();
  inputs_.reset();
  kv_ = KvPoolMemory();
  const int segments = 2 * weights_.config().num_layers;
  kv_ = KvPoolMemory(num_blocks, segments, kv_block_bytes(block_size) / uint64_t(segments), elastic,
                     device_, stream_);
  num_blocks_ = num_blocks;
  block_size_ = block_size;
  StepLimits limits;
  limits.max_tokens = options_.max_tokens_per_step;
  limits.max_seqs = options_.max_seqs_per_step;
  limits.max_table_width = (options_.max_model_len + block_size - 1) / block_size;
  limits.vocab_size = weights_.config().vocab_size;
  limits.block_size = block_size;
  limits.num_blocks = num_blocks;
  inputs_ = std::make_unique<StepInputs>(limits);
  if (options_.use_graphs) {
    try {
      capture_graphs();
    } catch (const RuntimeFailure& e) {
      if (!overlap_) throw;
      // A driver that launches overlapped kernels eagerly but cannot capture them: capture the
      // graphs without (eager steps then stop overlapping too, so both paths stay alike).
      log_warn("cuda runner: capturing decode graphs with overlapped launches failed (", e.what(),
               "); capturing them without");
      cudaGetLastError();
      destroy_graphs();
      overlap_ = false;
      capture_graphs();
    }
  }
  GPUFRAC_CUDA_CHECK(cudaStreamSynchronize(stream_));
  log_memory_breakdown();
}

void CudaRunner::log_memory_breakdown() const {
  const DeviceBuffer* step_buffers[] = {&residual_,
                                        &activations_,
                                        &queries_,
                                        &gemm_out_,
                                        &gemv_norm_,
                                        &attention_partials_,
                                        &beside_flash_exits_,
                                        &final_hidden_,
                                        &logits_,
                                        &sampler_scratch_,
                                        &sampled_,
                                        &logprobs_,
                                        &inv_freq_};
  uint64_t step_bytes = inputs_ ? inputs_->device_bytes() : 0;
  for (const DeviceBuffer* b : step_buffers) step_bytes += b->bytes();
  DeviceMemoryInfo info = device_memory_info();
  log_info("cuda runner: GPU memory besides the weights (", format_bytes(weights_.bytes()),
           "): step buffers ", format_bytes(step_bytes), " (logits ", format_bytes(logits_.bytes()),
           ", GEMM outputs ", format_bytes(gemm_out_.bytes()), ", activations ",
           format_bytes(activations_.bytes() + residual_.bytes() + queries_.bytes()),
           "), cuBLASLt workspace ", format_bytes(gemm_->workspace_bytes()), ", KV cache ",
           format_bytes(kv_.backed_bytes()),
           kv_.elastic() ? " (elastic: mapped in chunks of " + std::to_string(kv_.chunk_blocks()) +
                               " blocks, " +
                               format_bytes(kv_block_bytes(block_size_) * kv_.chunk_blocks()) + ")"
                         : std::string(),
           ", decode graphs for ", graphs_.size(), " batch sizes; the device reports ",
           format_bytes(info.free_bytes), " free of ", format_bytes(info.total_bytes));
}

void CudaRunner::choose_launch_overlap() {
  overlap_ = false;
  if (!options_.kernels.overlap_launches || compute_major_ < 9) return;
  // Two overlapped GEMVs on scratch buffers (nothing is live yet): the second depends on the
  // first programmatically.
  const ModelConfig& c = weights_.config();
  try {
    for (int i = 0; i < 2; ++i) {
      launch_gemv(activations_.as<bf16>(), weights_.layers[0].o_proj, gemm_out_.data(),
                  GemvStore::fp32, 1, c.hidden_size, c.q_width(), stream_, true);
    }
    GPUFRAC_CUDA_CHECK(cudaStreamSynchronize(stream_));
    overlap_ = true;
  } catch (const RuntimeFailure& e) {
    cudaGetLastError();
    log_warn("cuda runner: overlapped kernel launches refused (", e.what(), "); launching plainly");
  }
}

void CudaRunner::set_kernels(const CudaKernelChoice& kernels) {
  if (outstanding_ > 0) throw std::logic_error("set_kernels while steps are outstanding");
  GPUFRAC_CUDA_CHECK(cudaStreamSynchronize(stream_));
  previous_samples_ = 0;  // the timing and warm-up runs overwrite sampled_
  destroy_graphs();
  options_.kernels = kernels;
  options_.kernels.gemv_max_tokens = std::clamp(kernels.gemv_max_tokens, 0, kGemvMaxTokens);
  choose_launch_overlap();
  time_linear_kernels();
  if (inputs_ && options_.use_graphs) capture_graphs();
  GPUFRAC_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

int CudaRunner::bucket_for(int seqs) const {
  for (int b : buckets_) {
    if (b >= seqs) return b;
  }
  return 0;
}

void CudaRunner::destroy_graphs() {
  for (cudaGraphExec_t exec : graphs_) cudaGraphExecDestroy(exec);
  graphs_.clear();
}

cudaGraphExec_t CudaRunner::capture_decode_graph(int bucket) {
  // One eager run first: loads every kernel module and builds the cuBLASLt plans, none of which
  // may happen during capture.
  PackedStep warm = inputs_->pack_padding(bucket);
  inputs_->upload(stream_);
  enqueue_step({bucket, bucket, 0, bucket, 1}, warm.arrays);
  GPUFRAC_CUDA_CHECK(cudaStreamSynchronize(stream_));

  cudaGraph_t graph = nullptr;
  GPUFRAC_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue_step({bucket, bucket, 0, bucket, 1}, inputs_->bucket_arrays(bucket));
  } catch (...) {
    cudaStreamEndCapture(stream_, &graph);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  GPUFRAC_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  GPUFRAC_CUDA_CHECK(status);
  return exec;
}

void CudaRunner::capture_graphs() {
  std::string verdicts;  // "1: GEMV 2.671 / cuBLASLt 2.912 ms, ..."
  for (int bucket : buckets_) {
    cudaGraphExec_t graph = capture_decode_graph(bucket);
    // The GEMV was chosen one layer shape at a time; a step runs it between other kernels, where
    // a near tie can turn. The same step with every linear layer on cuBLASLt is timed against it
    // (padding rows: the linear layers are the whole difference) and the faster kept.
    std::vector<std::tuple<int, int, int, bool>> gemv_shapes;
    for (const auto& [shape, wins] : gemv_wins_) {
      if (wins && std::get<0>(shape) == bucket) gemv_shapes.push_back(shape);
    }
    if (!gemv_shapes.empty() && options_.time_linear_choices) {
      for (const auto& shape : gemv_shapes) gemv_wins_[shape] = false;
      cudaGraphExec_t cublas_graph = nullptr;
      float gemv_ms = 0, cublas_ms = 0;
      try {
        cublas_graph = capture_decode_graph(bucket);
        gemv_ms = best_graph_replay_ms(stream_, graph);
        cublas_ms = best_graph_replay_ms(stream_, cublas_graph);
      } catch (...) {
        cudaGraphExecDestroy(graph);
        if (cublas_graph) cudaGraphExecDestroy(cublas_graph);
        throw;
      }
      if (gemv_ms <= cublas_ms) {
        for (const auto& shape : gemv_shapes) gemv_wins_[shape] = true;
        cudaGraphExecDestroy(cublas_graph);
      } else {
        cudaGraphExecDestroy(graph);
        graph = cublas_graph;
      }
      char verdict[96];
      std::snprintf(verdict, sizeof verdict, "%s%d: GEMV %.3f / cuBLASLt %.3f ms",
                    verdicts.empty() ? "" : ", ", bucket, gemv_ms, cublas_ms);
      verdicts += verdict;
    }
    graphs_.push_back(graph);
  }
  if (!verdicts.empty()) {
    log_info(
        "cuda runner: decode steps with the GEMV timed against cuBLASLt alone (the faster "
        "kept): ",
        verdicts);
  }
}

void CudaRunner::replay_decode_graph(int bucket) {
  auto it = std::find(buckets_.begin(), buckets_.end(), bucket);
  if (it == buckets_.end() || graphs_.empty()) {
    throw RuntimeFailure("replay_decode_graph: no graph for a bucket of " + std::to_string(bucket));
  }
  GPUFRAC_CUDA_CHECK(cudaGraphLaunch(graphs_[size_t(it - buckets_.begin())], stream_));
}

void CudaRunner::submit(const StepBatch& batch) {
  if (!inputs_) throw RuntimeFailure("forward: the KV cache is not allocated");
  if (outstanding_ == 2) throw std::logic_error("submit: two steps are outstanding");
  int bucket = 0;
  if (!buckets_.empty() && StepInputs::fits_graph(batch, buckets_.back())) {
    bucket = bucket_for(int(batch.sequences.size()));
  }
  // After a failure nothing may name the rows of sampled_, which may hold anything.
  const int previous_samples = previous_samples_;
  previous_samples_ = 0;
  PackedStep packed = inputs_->pack(batch, bucket, previous_samples);
  inputs_->upload(stream_);
  if (bucket > 0 && !graphs_.empty() && !profiling_) {
    replay_decode_graph(bucket);
  } else {
    // A padded decode step without graphs splits attention exactly as its graph would.
    int max_queries = 1, min_queries = bucket > 0 || batch.sequences.empty() ? 1 : INT_MAX;
    int rows = 0, decode_rows = 0;
    for (const SequenceWork& s : batch.sequences) {
      const int queries = int(s.tokens.size());
      max_queries = std::max(max_queries, queries);
      min_queries = std::min(min_queries, queries);
      rows += queries;
      if (queries < kFlashMinQueries) decode_rows = rows;
    }
    StepShape shape{
        packed.num_tokens,     packed.num_samples,   bucket > 0 ? 0 : packed.max_context,
        packed.num_seqs,       max_queries,          min_queries,
        packed.adjusts_logits, packed.wants_logprobs};
    if (bucket == 0) {  // padded buckets: every row decodes
      shape.decode_rows = decode_rows;
      const auto& seqs = batch.sequences;
      auto is_long = [](const SequenceWork& s) { return s.tokens.size() >= kFlashMinQueries; };
      shape.first_flash_seq = int(std::find_if(seqs.begin(), seqs.end(), is_long) - seqs.begin());
    }
    enqueue_step(shape, packed.arrays);
  }
  StepSlot& slot = slots_[(first_slot_ + outstanding_) % 2];
  const int samples = packed.real_samples;
  const int vocab = weights_.config().vocab_size;
  GPUFRAC_CUDA_CHECK(cudaMemcpyAsync(slot.ids.data(), sampled_.data(), uint64_t(samples) * 4,
                                     cudaMemcpyDeviceToHost, stream_));
  slot.has_logprobs = packed.wants_logprobs;
  if (slot.has_logprobs) {
    GPUFRAC_CUDA_CHECK(cudaMemcpyAsync(slot.logprobs.data(), logprobs_.data(),
                                       uint64_t(samples) * kLogprobsStride * sizeof(TokenLogprob),
                                       cudaMemcpyDeviceToHost, stream_));
  }
  slot.logits.clear();
  if (batch.return_logits) {
    slot.logits.resize(size_t(samples) * size_t(vocab));
    GPUFRAC_CUDA_CHECK(cudaMemcpyAsync(slot.logits.data(), logits_.data(),
                                       uint64_t(samples) * uint64_t(vocab) * 4,
                                       cudaMemcpyDeviceToHost, stream_));
  }
  GPUFRAC_CUDA_CHECK(cudaEventRecord(slot.done, stream_));
  slot.samples = samples;
  previous_samples_ = samples;
  ++outstanding_;
}

void CudaRunner::collect(StepResult& result) {
  if (outstanding_ == 0) throw std::logic_error("collect: no step is outstanding");
  StepSlot& slot = slots_[first_slot_];
  first_slot_ = (first_slot_ + 1) % 2;
  --outstanding_;
  GPUFRAC_CUDA_CHECK(cudaEventSynchronize(slot.done));
  const int32_t* ids = slot.ids.as<int32_t>();
  result.next_tokens.assign(ids, ids + slot.samples);
  result.logprobs.clear();
  if (slot.has_logprobs) {
    const TokenLogprob* logprobs = slot.logprobs.as<TokenLogprob>();
    result.logprobs.assign(logprobs, logprobs + int64_t(slot.samples) * kLogprobsStride);
  }
  result.logits.swap(slot.logits);
  slot.logits.clear();
}

bool cuda_device_usable() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return count > 0;
}

std::unique_ptr<ModelRunner> make_cuda_runner(const RunnerOptions& options) {
  if (!cuda_device_usable()) {
    throw UsageError(
        "--device cuda: no usable CUDA device (check nvidia-smi and "
        "CUDA_VISIBLE_DEVICES), or use --device cpu");
  }
  std::optional<ModelConfig> preset = find_preset(options.model);
  DeviceWeights weights =
      preset
          ? DeviceWeights::generate(*preset, options.seed)
          : DeviceWeights::upload(load_model_weights(options.model, options.seed, options.threads));
  CudaRunnerOptions runner_options;
  if (options.max_num_batched_tokens > 0) {
    runner_options.max_tokens_per_step = options.max_num_batched_tokens;
  }
  if (options.max_num_seqs > 0) runner_options.max_seqs_per_step = options.max_num_seqs;
  runner_options.max_model_len = options.max_model_len;  // 0: the model's own
  runner_options.kv_map_lock = options.kv_map_lock;
  return std::make_unique<CudaRunner>(std::move(weights), runner_options);
}

}  // namespace gpufrac::engine
