// The CUDA backend of ModelRunner (runner.h): the forward pass of a dense decoder (Qwen3, Qwen2,
// Llama) in bf16 with fp32 accumulation and an fp32 residual stream, paged bf16 KV cache,
// sampling on the GPU. Defined in two files: cuda_runner.cpp (lifecycle, memory, decode graphs,
// submit/collect, the factory) and cuda_forward.cpp (the step's kernels, the linear-kernel
// choice, the per-stage profile).
//
// Per step: one host-to-device copy of the packed inputs (step_inputs.h), the layer kernels
// (layer_kernels.h, attention.h, gemm.h), logits for the last token of each sampling sequence
// only, the GPU sampler, and one device-to-host copy of the int32 token ids. A step whose rows
// use sampling extras (penalties, logit_bias, min-p, logprobs: sampling_extras.h) also uploads
// those, runs their kernels around the sampler and, for logprobs, copies them back; it runs
// eagerly (never in a decode graph) but stays pipelined. Pure decode steps
// replay a CUDA graph captured per batch bucket (1, 2, 4, 8, 16, 24, 32, 48, 64, ...); other
// batches sizes are padded up to the next bucket. Buckets are captured in allocate_kv_cache().
//
// Pipelining (runner.h): submit() packs and enqueues a step on the runner's stream and returns;
// collect() waits on that step's event. A placeholder token is read by the embedding kernel from
// the device buffer the previous step's sampler wrote, so the host never waits for it. Two
// page-locked input buffers and two id buffers let step n+1 be packed while step n runs.
// (return_logits copies to pageable memory, which makes that submit() wait for its step.)
//
// Memory: weights (uploaded once, device_weights.h) and activation buffers for
// max_tokens_per_step / max_seqs_per_step are taken at construction; available_memory_bytes()
// is then the driver's free memory (which honours MPS and preload caps) minus a reserve for the
// graphs and the step buffers, and allocate_kv_cache() takes the KV pool from it.
//
// Kernels size their grids to the SMs the process may use: cudaDevAttrMultiProcessorCount,
// which an MPS active-thread percentage lowers for the client.
//
// Not thread-safe (ModelRunner's contract): one engine thread calls it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/turn_lock.h"
#include "engine/cuda/attention.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/device_weights.h"
#include "engine/cuda/gemm.h"
#include "engine/cuda/gemv.h"
#include "engine/cuda/kv_pool_memory.h"
#include "engine/cuda/step_inputs.h"
#include "engine/model/runner.h"

namespace gpufrac::engine {

// Which kernels the forward pass uses: the fast paths (flash/tiled attention, attention.h; the
// weight-streaming GEMV for small token counts, gemv.h; overlapped launches, kernel_launch.cuh)
// or the simple ones they are checked against. GPUFRAC_CUDA_SIMPLE=1 in the environment selects
// the simple ones everywhere, so a broken fast kernel cannot block a run.
struct CudaKernelChoice {
  AttentionKernels attention = AttentionKernels::kFast;
  int gemv_max_tokens = 4;  // linear layers with at most this many tokens use the GEMV; 0: never
  // The layer kernels start while their predecessor finishes (programmatic dependent launch;
  // used on sm_90 and later where the driver accepts it, else ignored).
  bool overlap_launches = true;
  // Greedy and plain temperature rows are sampled by a scan split across the GPU (gpu_sampler.h).
  bool split_sampler = true;
  // Prompt chunks take the flash kernel on Hopper's warpgroup MMA where it runs (attention.h);
  // false: the mma.sync flash kernel everywhere.
  bool hopper_flash = true;
  // Percent of the SMs the Hopper flash kernel may hold, as a persistent grid, in a step with
  // decode rows beside its prompt chunks (AttentionParams::flash_sms); the decode rows take the
  // rest. 100: one flash block per work item, and every decode block waits for the flash kernel.
  int flash_sm_percent_beside_decodes = 50;
  static CudaKernelChoice simple() {
    return {AttentionKernels::kSimple, 0, false, false, false, 100};
  }
  static CudaKernelChoice from_environment();
  std::string describe() const;
};

struct CudaRunnerOptions {
  int max_tokens_per_step = 8192;  // SchedulerConfig's max_num_batched_tokens default
  int max_seqs_per_step = 256;     // SchedulerConfig's max_num_seqs default
  int max_model_len = 0;           // 0: the model's max_position_embeddings
  bool use_graphs = true;          // false: the same padded decode steps, launched eagerly
  CudaKernelChoice kernels = CudaKernelChoice::from_environment();
  // The GEMV against cuBLASLt decided by timing at start-up (time_linear_kernels, and the decode
  // graphs in capture_graphs); false: the GEMV wherever it may run, so that two runners run the
  // same kernels (tests that compare runners bit for bit).
  bool time_linear_choices = true;
  // Elastic KV: engines on one GPU given the same file map KV memory one at a time (a turn of a
  // TurnLock, common/turn_lock.h); when another engine has the turn, back_kv_blocks() maps
  // nothing and the engine asks again later, as when memory is short. Empty: no turns.
  std::string kv_map_lock;
};

class CudaRunner final : public ModelRunner {
 public:
  CudaRunner(DeviceWeights weights, const CudaRunnerOptions& options);
  ~CudaRunner() override;
  CudaRunner(const CudaRunner&) = delete;
  CudaRunner& operator=(const CudaRunner&) = delete;

  const ModelConfig& config() const override { return weights_.config(); }
  std::string device_name() const override;
  uint64_t available_memory_bytes() const override;
  uint64_t kv_block_bytes(int block_size) const override;
  // Throws std::logic_error while steps are outstanding.
  void allocate_kv_cache(int num_blocks, int block_size) override;
  void reserve_kv_cache(int max_blocks, int block_size) override;
  int back_kv_blocks(int blocks) override;
  void release_kv_blocks(int keep_blocks) override;
  int kv_chunk_blocks() const override { return kv_.chunk_blocks(); }
  void submit(const StepBatch& batch) override;
  void collect(StepResult& result) override;
  bool runs_ahead() const override { return true; }

  // For tests and benchmarks.
  int sm_count() const { return sm_count_; }
  cudaStream_t stream() const { return stream_; }
  const DeviceWeights& weights() const { return weights_; }
  const std::vector<int>& graph_buckets() const { return buckets_; }
  // The bucket a pure decode step of `seqs` sequences runs in; 0 if none holds it.
  int bucket_for(int seqs) const;
  const CudaKernelChoice& kernels() const { return options_.kernels; }
  // Whether the layer kernels are launched overlapped (kernels().overlap_launches where the
  // device and driver support it).
  bool overlapped_launches() const { return overlap_; }
  // Switches kernels (benchmarks compare them in one process); re-captures the decode graphs.
  // No step may be outstanding, and the next one may not take placeholders.
  void set_kernels(const CudaKernelChoice& kernels);
  // Runs `batch` once eagerly (no graph) with an event after every stage and returns the GPU
  // milliseconds per stage name (summed over layers), in order of first appearance. The step's
  // outputs are computed as by forward() and dropped.
  std::vector<std::pair<std::string, double>> profile_forward(const StepBatch& batch);
  // Replays the decode graph of `bucket` with the inputs last uploaded (a forward() of a decode
  // step in that bucket must come first): GPU work only, asynchronous on stream().
  void replay_decode_graph(int bucket);

 private:
  // A submitted step until collect(): where its ids land and when they are there.
  struct StepSlot {
    PinnedBuffer ids;            // int32 [seqs]: the sampled ids, copied back
    PinnedBuffer logprobs;       // TokenLogprob [seqs][kLogprobsStride], copied when asked for
    cudaEvent_t done = nullptr;  // recorded after the step's copies
    int samples = 0;             // real sampled rows
    bool has_logprobs = false;
    std::vector<float> logits;  // [samples x vocab] when the batch asked for logits
  };
  struct StepShape {
    int tokens = 0;
    int samples = 0;
    int max_context = 0;  // 0: unknown (graph capture)
    int seqs = 0;
    int max_queries = 1;  // most tokens of one sequence
    int min_queries = 1;  // fewest tokens of one sequence (1 for graph buckets: padding rows)
    // Sampling extras (sampling_extras.h): never in a graph.
    bool adjusts_logits = false;
    bool wants_logprobs = false;
    // Rows [0, decode_rows) hold every sequence of fewer than kFlashMinQueries tokens (the
    // decode attention kernel's rows; decodes come first in a served step); -1: every row.
    int decode_rows = -1;
    // Sequences before the first of at least kFlashMinQueries tokens (AttentionParams).
    int first_flash_seq = 0;
  };
  // y = x W^T for `tokens` rows: the GEMV for few tokens (kernels().gemv_max_tokens) where it
  // won the start-up timing (prefers_gemv), writing fp32, else cuBLASLt, writing bf16 when
  // `gemm_bf16` (half the bytes for a consumer kernel to read) and fp32 otherwise. With a
  // GemvNorm `takes` (x its rows), the GEMV that applies it. Returns where y was left.
  GemmOutput linear(const bf16* x, const bf16* w, void* y, int tokens, int n, int k, bool gemm_bf16,
                    const GemvNorm& takes = GemvNorm{});
  // residual_ += x W^T (`tokens` rows, an (n, k) layer): the GEMV where linear() would take it,
  // leaving the GemvNorm for `next_norm` when given, else cuBLASLt accumulating (and no GemvNorm).
  GemvNorm add_to_residual(const bf16* x, const bf16* w, int tokens, int n, int k,
                           const float* next_norm);
  // The bf16 rows RMSNorm(residual_) with `norm_weight` is taken from: those a GemvNorm left
  // (`left`, still unscaled: the GEMV reading them scales), else what launch_rmsnorm writes into
  // activations_.
  const bf16* normed_rows(const GemvNorm& left, const float* norm_weight, int tokens);
  // Whether the GEMV (fused_silu: launch_gemv_silu_mul against cuBLASLt + launch_silu_mul) is
  // used for `tokens` rows of the (n, k) linear layer: only where it won the start-up timing, so
  // a shape never timed takes cuBLASLt, which runs every shape.
  bool prefers_gemv(int tokens, int n, int k, bool fused_silu) const;
  // Times cuBLASLt's candidate algorithms for every linear shape of the model at the decode
  // buckets, powers of two and max_tokens_per_step rows, and keeps the fastest (gemm.h).
  void tune_linear_layers();
  // Times the GEMV against cuBLASLt once for every linear shape of the model and every token
  // count up to kernels().gemv_max_tokens, on the layers' distinct weights; fills gemv_wins_
  // (every entry true without options_.time_linear_choices).
  void time_linear_kernels();
  // The attention parameters every layer of a step shares, writing `out` (cuda_forward.cpp).
  AttentionParams step_attention(const StepShape& shape, const StepArrays& arrays, bf16* out);
  // Enqueues the whole forward pass (embedding to sampled ids) for inputs laid out as `arrays`.
  void enqueue_step(const StepShape& shape, const StepArrays& arrays);
  // The decode graph of `bucket` padding rows, as enqueue_step runs them now.
  cudaGraphExec_t capture_decode_graph(int bucket);
  // Every bucket's decode graph; where it runs the GEMV, the same step with cuBLASLt alone is
  // timed against it and the faster kept (gemv_wins_ follows the verdict).
  void capture_graphs();
  // allocate_kv_cache (elastic = false) and reserve_kv_cache: the pool, its step inputs, graphs.
  void set_up_kv_cache(int num_blocks, int block_size, bool elastic);
  // Decides overlap_ for options_.kernels: sm_90 or later, and a probe launch is accepted.
  void choose_launch_overlap();
  // Records an event ending stage `stage` while profile_forward() runs; otherwise nothing.
  void mark(const char* stage);
  void destroy_graphs();
  // Logs what the runner holds on the GPU besides its weights (step buffers, cuBLASLt workspace,
  // KV pool) and what the device reports free. The CUDA context and the decode graphs' memory
  // are not the runner's allocations: nvidia-smi's per-process figure shows them.
  void log_memory_breakdown() const;

  DeviceWeights weights_;
  CudaRunnerOptions options_;
  int device_ = 0;
  int sm_count_ = 0;
  int compute_major_ = 0;
  bool overlap_ = false;  // launch the layer kernels overlapped (kernel_launch.cuh)
  std::string device_label_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<CublasLtGemm> gemm_;
  std::map<std::tuple<int, int, int, bool>, bool> gemv_wins_;  // (tokens, n, k, fused_silu)

  // Activations, sized for options_ at construction.
  DeviceBuffer residual_;           // fp32 [tokens][hidden]
  DeviceBuffer activations_;        // bf16 [tokens][max(hidden, q_width, intermediate)]
  DeviceBuffer queries_;            // bf16 [tokens][q_width]
  DeviceBuffer gemm_out_;           // GEMM outputs (fp32 or bf16)
  uint64_t silu_offset_bytes_ = 0;  // where in gemm_out_ the fused gate|up GEMV writes
  DeviceBuffer gemv_norm_;          // a GemvNorm's rows (bf16 [kGemvMaxTokens][hidden]), then sums
  uint64_t gemv_norm_sums_offset_ = 0;
  DeviceBuffer attention_partials_;
  DeviceBuffer beside_flash_exits_;  // int32: AttentionParams::beside_flash_exits, 0 between uses
  DeviceBuffer final_hidden_;        // bf16 [seqs][hidden]
  DeviceBuffer logits_;              // fp32 [seqs][vocab]
  DeviceBuffer sampler_scratch_;     // the split sampler's per-slice winners
  DeviceBuffer sampled_;             // int32 [seqs]: the last step's samples (placeholders read it)
  DeviceBuffer logprobs_;  // TokenLogprob [seqs][kLogprobsStride]: the last step's logprobs
  DeviceBuffer inv_freq_;  // fp32 [head_dim / 2]
  int64_t partial_floats_ = 0;

  // Outstanding steps: a ring of two slots.
  StepSlot slots_[2];
  int first_slot_ = 0;
  int outstanding_ = 0;
  int previous_samples_ = 0;  // rows in sampled_ that the next step's placeholders may name

  // KV pool and what depends on its shape.
  KvPoolMemory kv_;
  TurnLock kv_map_lock_;  // options_.kv_map_lock
  int num_blocks_ = 0;
  int block_size_ = 0;
  std::unique_ptr<StepInputs> inputs_;
  std::vector<int> buckets_;
  std::vector<cudaGraphExec_t> graphs_;  // parallel to buckets_ (empty without graphs)
  bool profiling_ = false;
  std::vector<std::pair<const char*, cudaEvent_t>> marks_;
};

}  // namespace gpufrac::engine
