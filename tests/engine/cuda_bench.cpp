// gpufrac_cuda_bench: the CUDA runner's speed next to the physical floors of the GPU it runs on.
//
// Measures, in one process: the device copy bandwidth and a large bf16 GEMM's rate (the two
// ceilings), every linear layer shape of the model through cuBLASLt at several token counts,
// decode steps per batch size (CUDA-graph replay timed with events: GPU time; and forward()
// wall time: what a caller sees), one long prefill (back to back, and after an idle GPU), and
// one serving step (decodes beside a prompt chunk, as gpufrac serve mixes them). Every decode
// and prefill point runs once per kernel variant (--variants: the fast paths against the simple
// kernels, as ratios in the same run), the GEMV against cuBLASLt per shape, and, after every
// timed point, per-stage breakdowns of eager steps (events between the stages, inside NVTX
// ranges named "decode b<batch>", "prefill" and "mixed step", for ncu's --nvtx-include). Prints
// tables last and writes every number to --json. Run by tests/gpu/engine/run (scripts/gpu-check)
// on a GPU machine.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/cli_args.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/json.h"
#include "common/strings.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_runner.h"
#include "engine/cuda/cuda_runner_factory.h"
#include "engine/cuda/gemm.h"
#include "engine/cuda/gemv.h"
#include "engine/model/presets.h"

namespace gpufrac::engine {
namespace {

constexpr int kBlockSize = 16;

struct Stats {
  double median = 0, p10 = 0, p90 = 0;
  std::vector<double> each;  // the samples in the order they were taken
};

Stats summarize(std::vector<double> samples) {
  std::vector<double> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  auto at = [&](double q) { return sorted[size_t(q * double(sorted.size() - 1) + 0.5)]; };
  return {at(0.5), at(0.1), at(0.9), std::move(samples)};
}

class EventTimer {
 public:
  EventTimer() {
    GPUFRAC_CUDA_CHECK(cudaEventCreate(&start_));
    GPUFRAC_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~EventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  void start(cudaStream_t s) { GPUFRAC_CUDA_CHECK(cudaEventRecord(start_, s)); }
  double stop_ms(cudaStream_t s) {
    GPUFRAC_CUDA_CHECK(cudaEventRecord(stop_, s));
    GPUFRAC_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    GPUFRAC_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// Device-to-device copy bandwidth (bytes read + written per second).
double measure_copy_bandwidth(cudaStream_t stream) {
  const uint64_t bytes = 2ull << 30;
  DeviceBuffer a(bytes, "bandwidth probe"), b(bytes, "bandwidth probe");
  GPUFRAC_CUDA_CHECK(cudaMemsetAsync(a.data(), 1, bytes, stream));
  EventTimer timer;
  std::vector<double> ms;
  for (int i = 0; i < 12; ++i) {
    timer.start(stream);
    GPUFRAC_CUDA_CHECK(
        cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, stream));
    double t = timer.stop_ms(stream);
    if (i >= 2) ms.push_back(t);
  }
  return 2.0 * double(bytes) / (summarize(ms).median * 1e-3);
}

// Times run(w) for each layer's weights (distinct bytes, as in a forward pass), the calls
// captured in one graph; returns the median time per call in ms.
double time_per_layer(const std::vector<const bf16*>& weights, cudaStream_t stream, int repeats,
                      const std::function<void(const bf16*)>& run) {
  for (const bf16* w : weights) run(w);  // plans, warm-up
  GPUFRAC_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph = nullptr;
  GPUFRAC_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (const bf16* w : weights) run(w);
  GPUFRAC_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  GPUFRAC_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaGraphDestroy(graph);
  EventTimer timer;
  std::vector<double> ms;
  for (int i = 0; i < repeats + 2; ++i) {
    timer.start(stream);
    GPUFRAC_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    double t = timer.stop_ms(stream);
    if (i >= 2) ms.push_back(t / double(weights.size()));
  }
  cudaGraphExecDestroy(exec);
  return summarize(ms).median;
}

// time_per_layer of cuBLASLt's y = x W^T through `gemm`.
double time_gemm_per_layer(CublasLtGemm& gemm, const std::vector<const bf16*>& weights,
                           const bf16* x, void* y, bool y_bf16, int m, int n, int k,
                           cudaStream_t stream, int repeats) {
  return time_per_layer(weights, stream, repeats,
                        [&](const bf16* w) { gemm.run(x, w, y, y_bf16, m, n, k, stream); });
}

struct Sequences {
  std::vector<std::vector<int32_t>> tokens, tables;
};

// runner.profile_forward(batch) inside the NVTX range `range` (a push/pop range of this thread),
// so that a profiler can take the kernels of that eager step and no other:
// tests/gpu/engine/ncu_profile.sh's --nvtx-include "decode b32/".
std::vector<std::pair<std::string, double>> profile_in_range(CudaRunner& runner,
                                                             const StepBatch& batch,
                                                             const std::string& range) {
  nvtxRangePushA(range.c_str());
  auto stages = runner.profile_forward(batch);
  nvtxRangePop();
  return stages;
}

// A per-stage profile (CudaRunner::profile_forward) as [{"stage", "ms"}].
Json stages_json(const std::vector<std::pair<std::string, double>>& stages) {
  Json rows = Json::array();
  for (const auto& [name, ms] : stages) rows.push_back({{"stage", name}, {"ms", ms}});
  return rows;
}

// forward() of one step, two untimed then ten timed: GPU ms (events around it) and wall ms.
// With idle_ms > 0 the GPU idles that long before each step, as between the prompts of a lightly
// loaded server; back to back, a long prefill draws enough power that the GPU lowers its clocks
// (nvidia-smi: clocks_event_reasons SW power cap) and each later step takes longer.
std::pair<Stats, Stats> time_forward(CudaRunner& runner, const StepBatch& batch, int idle_ms = 0) {
  std::vector<double> gpu_ms, wall_ms;
  EventTimer timer;
  for (int i = 0; i < 12; ++i) {
    StepResult result;
    if (idle_ms > 0) {
      GPUFRAC_CUDA_CHECK(cudaStreamSynchronize(runner.stream()));
      std::this_thread::sleep_for(std::chrono::milliseconds(idle_ms));
    }
    timer.start(runner.stream());
    int64_t t0 = monotonic_ns();
    runner.forward(batch, result);
    double wall = ns_to_ms(monotonic_ns() - t0);
    double gpu = timer.stop_ms(runner.stream());
    if (i >= 2) {
      wall_ms.push_back(wall);
      gpu_ms.push_back(gpu);
    }
  }
  return {summarize(gpu_ms), summarize(wall_ms)};
}

// The idle time before each prefill of the "after idle" timing (time_forward).
constexpr int kPrefillIdleMs = 200;

struct Variant {
  std::string name;
  CudaKernelChoice kernels;
};

// fast: the default fast paths; serial: the same kernels launched one after the other (no
// overlapped launches); mma-flash: fast, with prompt chunks on the mma.sync flash kernel instead
// of the Hopper one (flash_hopper.cu); flash-sm-N: fast, the Hopper flash kernel on N% of the
// SMs beside decode rows (CudaKernelChoice::flash_sm_percent_beside_decodes); simple-attention:
// fast GEMV, simple attention; cublas: fast attention, cuBLASLt for every GEMM; simple: the first
// version's kernels.
Variant parse_variant(const std::string& name) {
  CudaKernelChoice kernels;  // "fast": the defaults
  if (name == "serial") {
    kernels.overlap_launches = false;
  } else if (name == "mma-flash") {
    kernels.hopper_flash = false;
  } else if (name.rfind("flash-sm-", 0) == 0) {
    kernels.flash_sm_percent_beside_decodes = std::atoi(name.c_str() + 9);
    if (kernels.flash_sm_percent_beside_decodes < 1 ||
        kernels.flash_sm_percent_beside_decodes > 100) {
      throw UsageError("--variants: flash-sm-N takes a percent from 1 to 100");
    }
  } else if (name == "simple-attention") {
    kernels.attention = AttentionKernels::kSimple;
  } else if (name == "cublas") {
    kernels.gemv_max_tokens = 0;
  } else if (name == "simple") {
    kernels = CudaKernelChoice::simple();
  } else if (name != "fast") {
    throw UsageError("--variants: unknown variant '" + name +
                     "' (use fast, serial, mma-flash, flash-sm-N, simple-attention, cublas, "
                     "simple)");
  }
  return {name, kernels};
}

std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    if (comma > start) names.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return names;
}

int bench_main(int argc, char** argv) {
  CliArgs args("gpufrac_cuda_bench [options]",
               "Times the CUDA runner's decode steps and prefill against the GPU's floors.");
  args.option("model", "NAME", "preset (weights generated on the GPU)", "qwen3-4b")
      .option("batches", "LIST", "decode batch sizes", "1,2,4,8,16,32,64")
      .option("context", "N", "positions each decoding sequence attends to", "2048")
      .option("prefill", "N", "tokens of the timed prefill", "2048")
      .option("iterations", "N", "timed repetitions per point", "50")
      .option("variants", "LIST",
              "kernel sets to time, the first is the headline: fast, serial (fast kernels without "
              "overlapped launches), mma-flash (fast, prompt chunks on the mma.sync flash kernel, "
              "not the Hopper one), flash-sm-N (fast, the Hopper flash kernel held to N% of the "
              "SMs beside decode rows; 100: one block per work item), simple-attention (fast "
              "GEMV, simple attention), cublas (fast attention, cuBLASLt GEMMs), simple (version "
              "1); a name given again is timed again as NAME#2, ...",
              "fast,serial,mma-flash,simple-attention,cublas,simple")
      .option("profile-batches", "LIST", "decode batches broken down per stage (first variant)",
              "1,32")
      .option("mixed", "DECODES,TOKENS[,START]",
              "a serving step of DECODES decoding sequences (at --context) and one prompt chunk of "
              "TOKENS tokens at position START (default --context / 2; START + TOKENS at most "
              "--context), timed and broken down per stage (first variant); 31,481 is what "
              "gpufrac serve's 512-token budget of a step with decodes gives at --max-num-seqs "
              "32; empty: none",
              "")
      .option("json", "FILE", "write every number here", "")
      .section("Example",
               "  gpufrac_cuda_bench --model qwen3-4b --batches 1,8,64 --variants fast,simple "
               "--json bench.json");
  if (!args.parse(argc, argv)) return 0;
  const std::string model = args.get("model");
  const std::vector<int> batches = parse_int_list(args.get("batches"), "--batches");
  const int context = int(parse_int(args.get("context"), "--context"));
  const int prefill = int(parse_int(args.get("prefill"), "--prefill"));
  const int iterations = int(parse_int(args.get("iterations"), "--iterations"));
  std::vector<Variant> variants;
  const std::vector<std::string> names = split_names(args.get("variants"));
  for (size_t i = 0; i < names.size(); ++i) {
    variants.push_back(parse_variant(names[i]));
    const auto repeats = std::count(names.begin(), names.begin() + long(i), names[i]);
    if (repeats > 0) variants.back().name += "#" + std::to_string(repeats + 1);
  }
  if (variants.empty()) throw UsageError("--variants: name at least one variant");
  const std::vector<int> profile_batches =
      parse_int_list(args.get("profile-batches"), "--profile-batches");
  const std::vector<int> mixed =
      args.get("mixed").empty() ? std::vector<int>{} : parse_int_list(args.get("mixed"), "--mixed");
  if (!mixed.empty() && (mixed.size() < 2 || mixed.size() > 3 || mixed[0] < 1 || mixed[1] < 1 ||
                         (mixed.size() == 3 && mixed[2] < 0))) {
    throw UsageError("--mixed must be DECODES,TOKENS[,START] (two positive numbers and a "
                     "position from 0), got '" + args.get("mixed") + "'");
  }
  if (!cuda_device_usable()) throw RuntimeFailure("no usable CUDA device (nvidia-smi -L)");
  std::optional<ModelConfig> config = find_preset(model);
  if (!config) throw UsageError("--model must be a preset name, got '" + model + "'");
  const ModelConfig& c = *config;
  const int max_batch = *std::max_element(batches.begin(), batches.end());
  const int chunk_start = mixed.size() == 3 ? mixed[2] : context / 2;
  if (!mixed.empty() && (mixed[0] > max_batch || chunk_start + mixed[1] > context)) {
    throw UsageError("--mixed: DECODES must be at most the largest of --batches (" +
                     std::to_string(max_batch) + ") and START + TOKENS at most --context (" +
                     std::to_string(context) + ")");
  }

  CudaRunnerOptions options;
  options.max_seqs_per_step = std::max(max_batch, 1);
  options.max_tokens_per_step =
      std::max({prefill, max_batch, mixed.empty() ? 0 : mixed[0] + mixed[1]});
  options.max_model_len = std::max(context, prefill) + kBlockSize;
  CudaRunner runner(DeviceWeights::generate(c, 0), options);
  cudaStream_t stream = runner.stream();
  const int blocks_per_seq = (options.max_model_len + kBlockSize - 1) / kBlockSize;
  runner.allocate_kv_cache(blocks_per_seq * (max_batch + 1), kBlockSize);

  Json out;
  cudaDeviceProp props{};
  GPUFRAC_CUDA_CHECK(cudaGetDeviceProperties(&props, 0));
  int driver = 0;
  cudaDriverGetVersion(&driver);
  out["gpu"] = props.name;
  out["sm_count_usable"] = runner.sm_count();
  out["cuda_driver_api"] = driver;
  out["model"] = model;
  out["weight_bytes"] = runner.weights().bytes();

  const double bandwidth = measure_copy_bandwidth(stream);
  out["copy_bandwidth_bytes_per_s"] = bandwidth;

  // GEMM shapes of the model, cuBLASLt, distinct weights per layer: `gemm` with the algorithm
  // tune() keeps (what the runner runs), `heuristic` with the heuristic's first.
  CublasLtGemm gemm, heuristic;
  const DeviceWeights& w = runner.weights();
  const int hidden = c.hidden_size, inter = c.intermediate_size, q_width = c.q_width();
  const int qkv = q_width + 2 * c.kv_width();
  const int max_m = std::max(prefill, 128);
  DeviceBuffer y(uint64_t(max_m) * uint64_t(std::max({qkv, 2 * inter, hidden})) * 4, "bench y");
  const bf16* x = w.embed_tokens;  // random bf16 rows as activations
  struct Shape {
    const char* name;
    int n, k;
    std::vector<const bf16*> weights;
  };
  std::vector<Shape> shapes = {{"qkv", qkv, hidden, {}},
                               {"o", hidden, q_width, {}},
                               {"gate_up", 2 * inter, hidden, {}},
                               {"down", hidden, inter, {}}};
  for (const DeviceLayerWeights& l : w.layers) {
    shapes[0].weights.push_back(l.qkv_proj);
    shapes[1].weights.push_back(l.o_proj);
    shapes[2].weights.push_back(l.gate_up_proj);
    shapes[3].weights.push_back(l.down_proj);
  }
  // The matrix-rate ceiling: a large bf16 GEMM on random data (8192 tokens x gate|up).
  const int probe_m = 8192;
  DeviceBuffer probe_y(uint64_t(probe_m) * uint64_t(2 * inter) * 2, "bench GEMM probe");
  const double gemm_flops = 2.0 * probe_m * double(2 * inter) * hidden;
  gemm.tune(x, shapes[2].weights, probe_y.data(), true, probe_m, 2 * inter, hidden, false, stream);
  const double gemm_ms = time_gemm_per_layer(gemm, shapes[2].weights, x, probe_y.data(), true,
                                             probe_m, 2 * inter, hidden, stream, 5);
  const double gemm_rate = gemm_flops / (gemm_ms * 1e-3);
  out["gemm_rate_flops_per_s"] = gemm_rate;
  out["gemm_rate_shape"] =
      std::to_string(probe_m) + "x" + std::to_string(2 * inter) + "x" + std::to_string(hidden);
  Json gemm_rows = Json::array();
  for (const Shape& s : shapes) {
    for (int m : {1, 2, 4, 8, 16, 32, 64, 128, prefill}) {
      if (m > max_m) continue;
      gemm.tune(x, s.weights, y.data(), false, m, s.n, s.k, false, stream);
      double ms = time_gemm_per_layer(gemm, s.weights, x, y.data(), false, m, s.n, s.k, stream, 20);
      double first_ms =
          time_gemm_per_layer(heuristic, s.weights, x, y.data(), false, m, s.n, s.k, stream, 20);
      double bytes = double(s.n) * s.k * 2;
      Json row = {{"shape", s.name},
                  {"m", m},
                  {"n", s.n},
                  {"k", s.k},
                  {"cublaslt_ms", ms},
                  {"cublaslt_bytes_per_s", bytes / (ms * 1e-3)},
                  {"cublaslt_first_algorithm_ms", first_ms},
                  {"floor_ms", bytes / bandwidth * 1e3}};
      if (m <= kGemvMaxTokens) {
        double gemv_ms = time_per_layer(s.weights, stream, 20, [&](const bf16* weight) {
          launch_gemv(x, weight, y.data(), GemvStore::fp32, m, s.n, s.k, stream);
        });
        row["gemv_ms"] = gemv_ms;
        row["gemv_bytes_per_s"] = bytes / (gemv_ms * 1e-3);
      }
      gemm_rows.push_back(row);
    }
  }
  out["gemm_shapes"] = gemm_rows;

  // Decode steps and one prefill, per kernel variant (the first is the headline).
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> token(0, c.vocab_size - 1);
  const double kv_bytes_per_position = double(c.num_layers) * 2 * c.kv_width() * 2;
  std::vector<Sequences> decode_inputs;
  std::vector<StepBatch> decode_batches;
  for (int batch_size : batches) {
    Sequences seqs;
    for (int i = 0; i < batch_size; ++i) {
      seqs.tokens.push_back({token(rng)});
      std::vector<int32_t> table(static_cast<size_t>(blocks_per_seq));
      for (int b = 0; b < blocks_per_seq; ++b) table[size_t(b)] = i * blocks_per_seq + b;
      seqs.tables.push_back(std::move(table));
    }
    decode_inputs.push_back(std::move(seqs));
  }
  for (size_t bi = 0; bi < batches.size(); ++bi) {
    StepBatch batch;
    const Sequences& seqs = decode_inputs[bi];
    for (int i = 0; i < batches[bi]; ++i) {
      batch.sequences.push_back(
          {seqs.tokens[size_t(i)], context - 1, seqs.tables[size_t(i)], true, {}});
    }
    decode_batches.push_back(std::move(batch));
  }
  std::vector<int32_t> prompt(static_cast<size_t>(prefill));
  for (int32_t& t : prompt) t = token(rng);
  std::vector<int32_t> table(static_cast<size_t>(blocks_per_seq));
  for (int b = 0; b < blocks_per_seq; ++b) table[size_t(b)] = max_batch * blocks_per_seq + b;
  StepBatch prefill_batch;
  prefill_batch.sequences.push_back({prompt, 0, table, true, {}});
  // The serving step: the largest batch's first DECODES sequences, then a prompt chunk of TOKENS
  // random tokens (as long as --prefill or not).
  StepBatch mixed_batch;
  std::vector<int32_t> chunk;  // the chunk's tokens: the batch refers to them
  if (!mixed.empty()) {
    const auto largest = decode_batches.begin() +
                         (std::max_element(batches.begin(), batches.end()) - batches.begin());
    mixed_batch.sequences.assign(largest->sequences.begin(), largest->sequences.begin() + mixed[0]);
    chunk.resize(size_t(mixed[1]));
    for (int32_t& t : chunk) t = token(rng);
    mixed_batch.sequences.push_back({chunk, chunk_start, table, true, {}});
  }
  const double linear_params =
      double(c.num_layers) * (double(qkv) * hidden + double(hidden) * q_width +
                              2.0 * inter * hidden + double(hidden) * inter);
  const double prefill_flops =
      2.0 * prefill * linear_params + 2.0 * hidden * c.vocab_size +
      2.0 * c.num_layers * c.num_heads * c.head_dim * double(prefill) * prefill;

  Json decode_rows = Json::array();
  for (size_t bi = 0; bi < batches.size(); ++bi) {
    double bytes = double(runner.weights().bytes()) + batches[bi] * kv_bytes_per_position * context;
    decode_rows.push_back({{"batch", batches[bi]},
                           {"bucket", runner.bucket_for(batches[bi])},
                           {"context", context},
                           {"bytes", bytes},
                           {"floor_ms", bytes / bandwidth * 1e3},
                           {"floor_ms_4_3tbps", bytes / 4.3e12 * 1e3},
                           {"variants", Json::object()}});
  }
  Json prefill_variants = Json::object(), mixed_variants = Json::object();
  Json profiles = Json::array();
  std::vector<std::vector<std::pair<std::string, double>>> profile_tables;
  std::vector<std::pair<std::string, double>> prefill_stages, mixed_stages;
  for (size_t vi = 0; vi < variants.size(); ++vi) {
    const Variant& variant = variants[vi];
    runner.set_kernels(variant.kernels);
    for (size_t bi = 0; bi < batches.size(); ++bi) {
      StepResult result;
      std::vector<double> wall_ms;
      for (int i = 0; i < iterations + 3; ++i) {
        int64_t t0 = monotonic_ns();
        runner.forward(decode_batches[bi], result);
        if (i >= 3) wall_ms.push_back(ns_to_ms(monotonic_ns() - t0));
      }
      int bucket = runner.bucket_for(batches[bi]);
      EventTimer timer;
      std::vector<double> gpu_ms;
      for (int i = 0; i < iterations + 3; ++i) {
        timer.start(stream);
        runner.replay_decode_graph(bucket);
        double t = timer.stop_ms(stream);
        if (i >= 3) gpu_ms.push_back(t);
      }
      Stats gpu = summarize(gpu_ms), wall = summarize(wall_ms);
      Json& row = decode_rows[bi];
      row["variants"][variant.name] = {{"graph_gpu_ms", gpu.median},
                                       {"forward_wall_ms", wall.median},
                                       {"overlapped_launches", runner.overlapped_launches()}};
      if (vi == 0) {
        row["graph_gpu_ms"] = gpu.median;
        row["graph_gpu_ms_p10"] = gpu.p10;
        row["graph_gpu_ms_p90"] = gpu.p90;
        row["forward_wall_ms"] = wall.median;
        row["kernels"] = variant.kernels.describe();
      }
    }
    auto [pg, pw] = time_forward(runner, prefill_batch);
    prefill_variants[variant.name] = {{"gpu_ms", pg.median}, {"wall_ms", pw.median}};
    if (!mixed.empty()) {
      auto [mg, mw] = time_forward(runner, mixed_batch);
      mixed_variants[variant.name] = {{"gpu_ms", mg.median}, {"wall_ms", mw.median}};
    }
    if (vi == 0) {
      auto [isolated, isolated_wall] = time_forward(runner, prefill_batch, kPrefillIdleMs);
      out["prefill"] = {{"tokens", prefill},
                        {"gpu_ms", pg.median},
                        {"wall_ms", pw.median},
                        {"gpu_ms_p10", pg.p10},
                        {"gpu_ms_p90", pg.p90},
                        {"gpu_ms_each", pg.each},
                        {"after_idle",
                         {{"idle_ms", kPrefillIdleMs},
                          {"gpu_ms", isolated.median},
                          {"wall_ms", isolated_wall.median},
                          {"gpu_ms_each", isolated.each}}},
                        {"flops", prefill_flops},
                        {"floor_ms", prefill_flops / gemm_rate * 1e3},
                        {"floor_ms_790tflops", prefill_flops / 790e12 * 1e3},
                        {"kernels", variant.kernels.describe()}};
      if (!mixed.empty()) {
        const Json& timed = mixed_variants[variant.name];
        out["mixed_step"] = {{"decodes", mixed[0]},
                             {"context", context},
                             {"chunk_tokens", mixed[1]},
                             {"chunk_start", chunk_start},
                             {"gpu_ms", timed["gpu_ms"]},
                             {"wall_ms", timed["wall_ms"]}};
      }
    }
  }
  // The per-stage profiles (eager steps) come after every timed point, with the first variant's
  // kernels set again, so that no eager step runs between two timed points: the first variant's
  // batches 2-32, timed after batch 1's profile, had run 1-4% slower than the same kernels in
  // later variants, and a run with no profile before them showed no such gap
  // (src/engine/cuda/NOTES.md, "Next").
  if (variants.size() > 1) runner.set_kernels(variants[0].kernels);
  auto profile = [&](const StepBatch& batch, const std::string& range) {
    runner.profile_forward(batch);  // warm-up
    return profile_in_range(runner, batch, range);
  };
  for (size_t bi = 0; bi < batches.size(); ++bi) {
    if (std::find(profile_batches.begin(), profile_batches.end(), batches[bi]) ==
        profile_batches.end()) {
      continue;
    }
    auto stages = profile(decode_batches[bi], "decode b" + std::to_string(batches[bi]));
    profiles.push_back(
        {{"batch", batches[bi]}, {"context", context}, {"stages", stages_json(stages)}});
    profile_tables.push_back(stages);
  }
  prefill_stages = profile(prefill_batch, "prefill");
  out["prefill_profile"] = {{"tokens", prefill}, {"stages", stages_json(prefill_stages)}};
  if (!mixed.empty()) {
    mixed_stages = profile(mixed_batch, "mixed step");
    out["mixed_step"]["stages"] = stages_json(mixed_stages);
  }
  out["decode"] = decode_rows;
  out["prefill"]["variants"] = prefill_variants;
  if (!mixed.empty()) out["mixed_step"]["variants"] = mixed_variants;
  out["decode_profiles"] = profiles;

  if (!args.get("json").empty()) {
    std::ofstream file(args.get("json"));
    file << out.dump(2) << "\n";
  }

  std::printf("\n%s on %s (%d SMs usable): copy %.2f TB/s, bf16 GEMM %.0f TFLOP/s (%s)\n",
              model.c_str(), props.name, runner.sm_count(), bandwidth / 1e12, gemm_rate / 1e12,
              out["gemm_rate_shape"].get<std::string>().c_str());
  std::printf("%-8s %-5s %-12s %-10s %-10s %-10s\n", "shape", "m", "cublaslt_ms", "gemv_ms",
              "gemv/cublas", "floor_ms");
  for (const Json& r : gemm_rows) {
    const double cublas = r["cublaslt_ms"].get<double>();
    char gemv[16] = "-", gemv_ratio[16] = "-";
    if (r.contains("gemv_ms")) {
      std::snprintf(gemv, sizeof gemv, "%.4f", r["gemv_ms"].get<double>());
      std::snprintf(gemv_ratio, sizeof gemv_ratio, "%.2f", r["gemv_ms"].get<double>() / cublas);
    }
    std::printf("%-8s %-5d %-12.4f %-10s %-10s %-10.4f\n", r["shape"].get<std::string>().c_str(),
                r["m"].get<int>(), cublas, gemv, gemv_ratio, r["floor_ms"].get<double>());
  }
  for (size_t i = 0; i < profile_tables.size(); ++i) {
    double total = 0;
    for (const auto& entry : profile_tables[i]) total += entry.second;
    std::printf("eager decode step, batch %d, per stage (%s): %.3f ms\n",
                profiles[i]["batch"].get<int>(), variants[0].name.c_str(), total);
    for (const auto& [name, ms] : profile_tables[i]) {
      std::printf("  %-28s %8.3f ms %5.1f%%\n", name.c_str(), ms, 100.0 * ms / total);
    }
  }
  if (!prefill_stages.empty()) {
    double total = 0;
    for (const auto& entry : prefill_stages) total += entry.second;
    std::printf("eager prefill of %d tokens, per stage (%s): %.3f ms\n", prefill,
                variants[0].name.c_str(), total);
    for (const auto& [name, ms] : prefill_stages) {
      std::printf("  %-28s %8.3f ms %5.1f%%\n", name.c_str(), ms, 100.0 * ms / total);
    }
  }
  if (!mixed_stages.empty()) {
    const Json& ms = out["mixed_step"];
    std::printf(
        "serving step of %d decodes + a %d-token prompt chunk: %.3f ms GPU, %.3f ms wall; "
        "per stage, eager (%s):\n",
        mixed[0], mixed[1], ms["gpu_ms"].get<double>(), ms["wall_ms"].get<double>(),
        variants[0].name.c_str());
    for (const auto& [name, stage_ms] : mixed_stages) {
      std::printf("  %-28s %8.3f ms\n", name.c_str(), stage_ms);
    }
    std::printf("serving step GPU ms per variant:");
    for (const Variant& v : variants) {
      std::printf(" %s %.3f", v.name.c_str(), mixed_variants[v.name]["gpu_ms"].get<double>());
    }
    std::printf("\n");
  }
  std::printf("%-6s %-10s %-8s", "batch", "floor_ms", "floor%");
  for (const Variant& v : variants) std::printf(" %-16s", (v.name + "_ms").c_str());
  for (size_t vi = 1; vi < variants.size(); ++vi)
    std::printf(" %-10s", ("x" + variants[vi].name).substr(0, 10).c_str());
  std::printf("\n");
  for (const Json& r : decode_rows) {
    double gpu = r["graph_gpu_ms"].get<double>(), floor = r["floor_ms"].get<double>();
    std::printf("%-6d %-10.3f %-8.0f", r["batch"].get<int>(), floor, 100.0 * floor / gpu);
    for (const Variant& v : variants) {
      std::printf(" %-16.3f", r["variants"][v.name]["graph_gpu_ms"].get<double>());
    }
    for (size_t vi = 1; vi < variants.size(); ++vi) {
      std::printf(" %-10.2f", r["variants"][variants[vi].name]["graph_gpu_ms"].get<double>() / gpu);
    }
    std::printf("\n");
  }
  const Json& pf = out["prefill"];
  std::printf("prefill %d tokens: %.2f ms GPU, %.2f ms wall; FLOP floor %.2f ms (%.0f%%)", prefill,
              pf["gpu_ms"].get<double>(), pf["wall_ms"].get<double>(),
              prefill_flops / gemm_rate * 1e3,
              100.0 * prefill_flops / gemm_rate * 1e3 / pf["gpu_ms"].get<double>());
  for (size_t vi = 1; vi < variants.size(); ++vi) {
    std::printf("; %s %.2f ms", variants[vi].name.c_str(),
                prefill_variants[variants[vi].name]["gpu_ms"].get<double>());
  }
  std::printf("\nprefill %d tokens after %d ms idle each (%s): %.2f ms GPU, %.2f ms wall\n",
              prefill, kPrefillIdleMs, variants[0].name.c_str(),
              pf["after_idle"]["gpu_ms"].get<double>(), pf["after_idle"]["wall_ms"].get<double>());
  return 0;
}

}  // namespace
}  // namespace gpufrac::engine

int main(int argc, char** argv) {
  try {
    return gpufrac::engine::bench_main(argc, argv);
  } catch (const gpufrac::UsageError& e) {
    std::fprintf(stderr, "gpufrac_cuda_bench: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpufrac_cuda_bench: %s\n", e.what());
    return 1;
  }
}
