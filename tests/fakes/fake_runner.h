// FakeRunner: a ModelRunner for tests and benchmarks of the serving layer, without any math.
//
// It keeps a real paged "KV cache" of token ids: a step writes every fed token into the slot
// its block table names and derives the next token from a hash of the whole context read back
// through the block table (plus seed and `generated` when temperature > 0). So the output depends
// on the context exactly as the paging delivers it: a wrong block table, a block shared by two
// sequences or a lost chunk changes the tokens, and a request's tokens do not depend on batching,
// chunking or preemption. Contract violations (short block table, block id out of range, one
// block in two sequences of a step, reading a position never written) throw std::logic_error.
//
// Tokens are drawn from [0, vocab_size - 1); the last id is EOS, produced only when the hash
// says so (eos_one_in) and never while suppressed. A row that asks for k logprobs gets made-up
// ones: the sampled token at -0.5, and as its top k the ids token, token + 1, ... at -0.5,
// -1.5, ... (so the sampled token is the likeliest). A step sleeps step_time + per_token_time
// x tokens fed. Steps run inside submit() (SynchronousRunner: placeholders of the previous step's
// samples arrive resolved), on one thread at a time; the counters may be read from any.
// The sleep does not count as CPU: caller_cpu_ns_between_steps() measures the caller's own work.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/model/synchronous_runner.h"

namespace gpufrac::fakes {

struct FakeRunnerOptions {
  int vocab_size = 1000;
  int max_position_embeddings = 4096;
  std::chrono::microseconds step_time{0};
  std::chrono::microseconds per_token_time{0};
  uint64_t available_memory_bytes = uint64_t(1) << 30;
  uint64_t kv_bytes_per_token = 1024;
  int eos_one_in = 0;  // 0: never EOS; n: EOS when hash % n == 0
  // false: hash only the last position's token (O(1) per sequence; for benchmarks, where hashing
  // the whole context would cost more than the engine being measured).
  bool hash_whole_context = true;
  // What runs_ahead() claims: true (the default) drives the engine's pipelined path (step n+1
  // submitted before step n is collected, placeholders), as with the CUDA runner; false, the
  // CPU runner's one step at a time.
  bool runs_ahead = true;
  // Elastic KV (runner.h): > 0 backs the pool in chunks of this many blocks, and never more than
  // elastic_limit_blocks (the device's memory, as a test sets it; 0: the whole pool). A step
  // that names a block with no memory behind it throws.
  int elastic_chunk_blocks = 0;
  std::atomic<int>* elastic_limit_blocks = nullptr;
  // Runs at the start of every step (tests use it to block a step or to throw).
  std::function<void(const engine::StepBatch&)> on_step;
};

class FakeRunner : public engine::SynchronousRunner {
 public:
  explicit FakeRunner(FakeRunnerOptions options = {});

  const engine::ModelConfig& config() const override { return config_; }
  std::string device_name() const override { return "fake"; }
  uint64_t available_memory_bytes() const override { return options_.available_memory_bytes; }
  uint64_t kv_block_bytes(int block_size) const override {
    return options_.kv_bytes_per_token * uint64_t(block_size);
  }
  void allocate_kv_cache(int num_blocks, int block_size) override;
  void reserve_kv_cache(int max_blocks, int block_size) override;
  int back_kv_blocks(int blocks) override;
  void release_kv_blocks(int keep_blocks) override;
  int kv_chunk_blocks() const override;
  int backed_blocks() const { return backed_blocks_.load(); }
  int most_backed_blocks() const { return most_backed_blocks_.load(); }
  bool runs_ahead() const override { return options_.runs_ahead; }

  int32_t eos_token() const { return config_.vocab_size - 1; }
  int64_t steps() const { return steps_.load(); }
  int64_t tokens_fed() const { return tokens_fed_.load(); }
  int max_sequences_in_step() const { return max_sequences_in_step_.load(); }
  // CPU time the calling thread (the engine loop) spent between consecutive steps:
  // the engine's own per-step work, unaffected by other load on the machine.
  int64_t caller_cpu_ns_between_steps() const { return caller_cpu_ns_.load(); }

 protected:
  void compute(const engine::StepBatch& batch, engine::StepResult& result) override;

 private:
  int32_t next_token(const engine::SequenceWork& work) const;
  void fill_logprobs(const engine::StepBatch& batch, engine::StepResult& result) const;

  FakeRunnerOptions options_;
  engine::ModelConfig config_;
  int block_size_ = 0;
  std::atomic<int> backed_blocks_{0};
  std::atomic<int> most_backed_blocks_{0};
  std::vector<int32_t> kv_;           // [num_blocks * block_size] token ids, -1 = never written
  std::vector<int64_t> block_step_;   // the step that last used each block (sharing check)
  std::atomic<int64_t> steps_{0};
  std::atomic<int64_t> tokens_fed_{0};
  std::atomic<int> max_sequences_in_step_{0};
  std::atomic<int64_t> caller_cpu_ns_{0};
  int64_t last_return_cpu_ns_ = -1;
};

}  // namespace gpufrac::fakes
