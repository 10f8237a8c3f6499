// The CPU cost of one engine step outside the runner: Scheduler::schedule(), building the
// StepBatch the runner reads, complete_step(), appending the sampled tokens and retiring finished
// requests (replaced at once by new ones, so the mix of prefill and decode stays steady).
// Target: < 0.2 ms per step with 64 running sequences (a GPU decode step takes ~2-5 ms).
// The "allocs/step" counter counts heap allocations in the timed loop: they come from the
// requests that arrive (a Sequence and its token vector), not from planning the step.
// Run: build-x/tests/engine/scheduler_bench [--benchmark_repetitions=5]
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

namespace {
std::atomic<uint64_t> g_allocations{0};
}  // namespace

void* operator new(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
// These replace the global delete and pair with the malloc in the new above.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

#include "engine/model/runner.h"
#include "engine/scheduler.h"

namespace gpufrac::engine {
namespace {

constexpr int kBlockSize = 16;

struct Workload {
  int num_seqs;
  int long_prompt;   // every 4th request has this prompt (chunked prefill)...
  int short_prompt;  // ...the others this one
  int max_tokens;
};

void BM_SchedulerStep(benchmark::State& state) {
  Workload w{static_cast<int>(state.range(0)), 1536, 128, 128};
  int64_t budget = state.range(1);
  int per_seq_blocks = (w.long_prompt + w.max_tokens) / kBlockSize + 1;
  KvBlockAllocator allocator(w.num_seqs * per_seq_blocks, kBlockSize);
  Scheduler scheduler({.max_num_seqs = w.num_seqs, .max_num_batched_tokens = int(budget)},
                      allocator);
  std::vector<std::unique_ptr<Sequence>> live(w.num_seqs);
  std::vector<int32_t> eos = {151645, 151643};
  uint64_t next_id = 0;
  auto make = [&](int slot) {
    int prompt = next_id % 4 == 0 ? w.long_prompt : w.short_prompt;
    StopCriteria stop;
    stop.max_tokens = w.max_tokens;
    stop.min_tokens = 2;
    live[slot] = std::make_unique<Sequence>(next_id++, std::vector<int32_t>(prompt, 11), stop,
                                            SamplingParams{}, eos);
    scheduler.add(live[slot].get());
  };
  for (int i = 0; i < w.num_seqs; ++i) make(i);
  StepBatch batch;
  batch.sequences.reserve(w.num_seqs);
  // Warm up into the steady state (staggered finishes) before timing.
  auto step = [&](int64_t& prefill_chunks, int64_t& decodes) {
    const SchedulerOutput& out = scheduler.schedule();
    batch.sequences.clear();
    for (const ScheduledChunk& c : out.chunks) {
      SequenceWork work;
      work.tokens = std::span<const int32_t>(c.sequence->tokens()).subspan(c.start, c.num_tokens);
      work.start_position = static_cast<int32_t>(c.start);
      work.block_table = c.sequence->block_table;
      work.sample = c.sample;
      work.sampling = c.sequence->sampling_for_step();
      batch.sequences.push_back(work);
      (c.num_tokens == 1 ? decodes : prefill_chunks)++;
    }
    scheduler.complete_step();
    for (const ScheduledChunk& c : out.chunks) {
      if (!c.sample) continue;
      Sequence* s = c.sequence;
      if (s->append_token(static_cast<int32_t>(s->num_tokens() & 1023)) != FinishReason::kNone) {
        scheduler.finish(s);
        int slot = 0;
        while (live[slot].get() != s) ++slot;
        make(slot);
      }
    }
    benchmark::DoNotOptimize(batch.sequences.data());
  };
  int64_t prefill_chunks = 0, decodes = 0;
  for (int i = 0; i < 2000; ++i) step(prefill_chunks, decodes);
  prefill_chunks = decodes = 0;
  uint64_t arrivals_before = next_id;
  uint64_t allocations_before = g_allocations.load();
  for (auto _ : state) step(prefill_chunks, decodes);
  state.counters["allocs/step"] =
      double(g_allocations.load() - allocations_before) / double(state.iterations());
  state.counters["arrivals/step"] = double(next_id - arrivals_before) / double(state.iterations());
  state.counters["decodes/step"] = double(decodes) / double(state.iterations());
  state.counters["prefill_chunks/step"] = double(prefill_chunks) / double(state.iterations());
  state.counters["preemptions"] = double(scheduler.num_preemptions_total());
}

// {running sequences, token budget per step}
BENCHMARK(BM_SchedulerStep)->Args({64, 512})->Args({64, 2048})->Args({64, 8192})->Args({256, 8192})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpufrac::engine

BENCHMARK_MAIN();
