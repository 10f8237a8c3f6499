// The engine loop's own CPU cost per step, outside the runner: scheduling, building the
// StepBatch, dispatching each sampled token to its request, and (with HTTP) formatting SSE chunks
// and handing them to the HTTP loop thread, which writes them to real sockets. Measured as the
// engine thread's CPU time between the steps of a FakeRunner that does almost nothing; on a
// GPU this is what a step costs on top of the forward pass unless it overlaps with it.
// Run: build-x/tests/engine/engine_loop_bench (the CPU count and load of the machine matter:
// with HTTP, the client threads compete with the engine for cores).
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "fakes/fake_runner.h"
#include "server_test_client.h"
#include "server_test_fixture.h"

namespace gpufrac {
namespace {

using namespace std::chrono_literals;

constexpr int kMaxTokens = 4000;

std::string prompt_json() {
  std::string p = "[";
  for (int t = 0; t < 32; ++t) p += (t ? "," : "") + std::to_string(t * 17 % 999);
  return p + "]";
}

// Waits for `steps` runner steps; returns the engine thread's CPU seconds per step (its work
// between steps) and sets `wall_s` to the wall time per step.
double measure_steps(const fakes::FakeRunner& runner, int64_t steps, double& wall_s) {
  int64_t start = runner.steps();
  int64_t cpu_start = runner.caller_cpu_ns_between_steps();
  auto t0 = std::chrono::steady_clock::now();
  while (runner.steps() < start + steps) std::this_thread::sleep_for(100us);
  int64_t done = runner.steps() - start;
  wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / done;
  return double(runner.caller_cpu_ns_between_steps() - cpu_start) / 1e9 / double(done);
}

// One benchmark iteration = 1000 steps; the reported time is the engine thread's CPU time per
// step (independent of other load); "wall_us/step" is what the clock saw.
void run_iterations(benchmark::State& state, const fakes::FakeRunner& runner) {
  double wall_s = 0, wall_total = 0;
  measure_steps(runner, 200, wall_s);  // warm up into a steady batch
  for (auto _ : state) {
    state.SetIterationTime(measure_steps(runner, 1000, wall_s));
    wall_total += wall_s;
  }
  state.counters["wall_us/step"] = wall_total / double(state.iterations()) * 1e6;
  state.counters["batch"] = runner.max_sequences_in_step();
}

// Requests that resubmit themselves when they finish, keeping `n` in flight; tokens are dropped.
class Resubmitting : public engine::RequestSink, public std::enable_shared_from_this<Resubmitting> {
 public:
  explicit Resubmitting(engine::Engine& engine) : engine_(engine) {}
  void on_token(const engine::GeneratedToken&) override {}
  void on_finish(const engine::RequestOutcome& outcome) override {
    if (outcome.reason != engine::FinishReason::kCancelled) submit();
  }
  void submit() {
    engine::EngineRequest r;
    for (int t = 0; t < 32; ++t) r.prompt.push_back(t * 17 % 999);
    r.stop.max_tokens = kMaxTokens;
    r.stop.ignore_eos = true;
    r.temperature = 0;
    engine_.submit(engine_.new_request_id(), std::move(r), shared_from_this());
  }

 private:
  engine::Engine& engine_;
};

void BM_EngineStepNoHttp(benchmark::State& state) {
  int sequences = static_cast<int>(state.range(0));
  fakes::FakeRunnerOptions cheap;
  cheap.hash_whole_context = false;
  fakes::FakeRunner runner(cheap);
  engine::EngineOptions o;
  o.block_size = 16;
  o.max_model_len = 32 + kMaxTokens;
  o.num_kv_blocks = sequences * (o.max_model_len / 16 + 1);
  o.scheduler = {.max_num_seqs = sequences, .max_num_batched_tokens = 8192};
  engine::Engine engine(runner, o);
  engine.start();
  std::vector<std::shared_ptr<Resubmitting>> requests;
  for (int i = 0; i < sequences; ++i) {
    requests.push_back(std::make_shared<Resubmitting>(engine));
    requests.back()->submit();
  }
  run_iterations(state, runner);
  engine.stop();
}

void BM_EngineStepWithHttp(benchmark::State& state) {
  int clients = static_cast<int>(state.range(0));
  testing::ServerSetup setup;
  setup.runner.hash_whole_context = false;
  setup.block_size = 16;
  setup.max_model_len = 32 + kMaxTokens;
  setup.num_kv_blocks = clients * (setup.max_model_len / 16 + 1);
  setup.max_num_seqs = clients;
  setup.max_num_batched_tokens = 8192;
  testing::FakeServer server(setup);
  std::atomic<bool> stop{false};
  std::string body = R"({"prompt":)" + prompt_json() + R"(,"max_tokens":)" +
                     std::to_string(kMaxTokens) +
                     R"(,"temperature":0,"ignore_eos":true,"stream":true})";
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&] {
      while (!stop) testing::http_exchange(server.port(), testing::http_post("/v1/completions", body), 600);
    });
  }
  run_iterations(state, server.runner());
  stop = true;
  server.engine().stop();  // ends every stream, so the clients return
  for (auto& t : threads) t.join();
}

BENCHMARK(BM_EngineStepNoHttp)->Arg(1)->Arg(32)->Arg(256)->UseManualTime()->Iterations(3)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EngineStepWithHttp)->Arg(1)->Arg(32)->Arg(256)->UseManualTime()->Iterations(3)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpufrac

BENCHMARK_MAIN();
