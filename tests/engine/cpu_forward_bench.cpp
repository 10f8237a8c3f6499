// Costs of the CPU model path (not run by CI): seeded weight generation, a forward step of the
// CPU runner (decode batches and a prefill) and sampling over the full Qwen3 vocabulary.
//   build-*/tests/engine/cpu_forward_bench [--benchmark_filter=Tiny]
#include <benchmark/benchmark.h>

#include <map>
#include <memory>

#include "engine/cpu/cpu_runner.h"
#include "engine/model/presets.h"
#include "engine/model/sampler.h"

namespace gpufrac::engine {
namespace {

void BM_GeneratePresetWeights(benchmark::State& state, const std::string& preset) {
  ModelConfig config = *find_preset(preset);
  uint64_t bytes = 0;
  for (auto _ : state) {
    ModelWeights weights = generate_random_weights(config, 1, 0);
    bytes = weights.total_bytes();
    benchmark::DoNotOptimize(weights.embed_tokens.data);
  }
  state.SetBytesProcessed(int64_t(bytes) * state.iterations());
}
BENCHMARK_CAPTURE(BM_GeneratePresetWeights, tiny, std::string("tiny"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GeneratePresetWeights, qwen3_0_6b, std::string("qwen3-0.6b"))
    ->Unit(benchmark::kMillisecond)->Iterations(2);

const ModelWeights& weights_of(const std::string& preset) {
  static std::map<std::string, ModelWeights> cache;
  auto it = cache.find(preset);
  if (it == cache.end()) {
    it = cache.emplace(preset, generate_random_weights(*find_preset(preset), 1, 0)).first;
  }
  return it->second;
}

// One decode step of `batch` sequences, each with `context` tokens already in the cache, on
// `threads` threads (0: every usable CPU). Batch 1 and 2 on 1 and 2 threads are the steps of a
// CPU experiment's arms at 2 requests per core pair: a model on one core (fractions), alone on
// both (timeslice, dedicated c=1) and two sequences on both (dedicated c=2).
void decode_step(benchmark::State& state, const std::string& preset) {
  int batch_size = int(state.range(0)), context = int(state.range(1)), block_size = 16;
  int threads = int(state.range(2));
  std::unique_ptr<ModelRunner> runner = make_cpu_runner(weights_of(preset), threads);
  int blocks_per_sequence = (context + 1 + block_size - 1) / block_size;
  runner->allocate_kv_cache(batch_size * blocks_per_sequence, block_size);
  std::vector<std::vector<int32_t>> tables(batch_size), prompts(batch_size);
  StepBatch prefill;
  for (int s = 0; s < batch_size; ++s) {
    for (int b = 0; b < blocks_per_sequence; ++b) tables[s].push_back(s * blocks_per_sequence + b);
    for (int t = 0; t < context; ++t) prompts[s].push_back((s * 7919 + t * 104729) % 151936);
    prefill.sequences.push_back({prompts[s], 0, tables[s], false, {}});
  }
  StepResult result;
  runner->forward(prefill, result);
  std::vector<int32_t> next(batch_size, 42);
  StepBatch decode;
  for (int s = 0; s < batch_size; ++s) {
    decode.sequences.push_back({std::span(&next[s], 1), context, tables[s], true, {}});
  }
  for (auto _ : state) runner->forward(decode, result);
  state.SetItemsProcessed(state.iterations() * batch_size);
  state.SetLabel(runner->device_name());
}

void BM_TinyDecodeStep(benchmark::State& state) { decode_step(state, "tiny"); }
// Wall time per step (items/s = sequences' tokens per second), CPU time of all threads.
BENCHMARK(BM_TinyDecodeStep)
    ->ArgNames({"batch", "context", "threads"})
    ->ArgsProduct({{1, 2}, {128}, {1, 2}})
    ->Args({16, 128, 0})
    ->Args({64, 512, 0})
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);

void BM_Qwen3_0_6bDecodeStep(benchmark::State& state) { decode_step(state, "qwen3-0.6b"); }
BENCHMARK(BM_Qwen3_0_6bDecodeStep)
    ->ArgNames({"batch", "context", "threads"})
    ->Args({1, 64, 0})
    ->Args({8, 64, 0})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

void BM_TinyPrefill(benchmark::State& state) {
  int tokens = int(state.range(0)), block_size = 16;
  std::unique_ptr<ModelRunner> runner = make_cpu_runner(weights_of("tiny"), 0);
  runner->allocate_kv_cache((tokens + block_size - 1) / block_size, block_size);
  std::vector<int32_t> table, prompt;
  for (int b = 0; b * block_size < tokens; ++b) table.push_back(b);
  for (int t = 0; t < tokens; ++t) prompt.push_back((t * 104729) % 151936);
  StepBatch batch;
  batch.sequences.push_back({prompt, 0, table, true, {}});
  StepResult result;
  for (auto _ : state) runner->forward(batch, result);
  state.SetItemsProcessed(state.iterations() * tokens);
}
BENCHMARK(BM_TinyPrefill)->Arg(512)->Arg(2048)->Unit(benchmark::kMillisecond);

void BM_SampleFullVocabulary(benchmark::State& state) {
  std::vector<float> logits(151936);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float((i * 7919) % 1000) / 100.0f;
  SamplingParams params;
  params.temperature = state.range(0) ? 0.7f : 0.0f;
  params.top_p = state.range(1) ? 0.9f : 1.0f;
  params.top_k = int(state.range(2));
  for (auto _ : state) {
    benchmark::DoNotOptimize(sample_token(logits, params));
    ++params.generated;
  }
}
// {temperature on, top-p on, top-k}
BENCHMARK(BM_SampleFullVocabulary)->Args({0, 0, 0})->Args({1, 0, 0})->Args({1, 1, 0})
    ->Args({1, 1, 50})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpufrac::engine

BENCHMARK_MAIN();
