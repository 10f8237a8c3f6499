#include "fakes/fake_runner.h"

#include <time.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>

namespace gpufrac::fakes {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 29);
}

int64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

FakeRunner::FakeRunner(FakeRunnerOptions options) : options_(std::move(options)) {
  config_.name = "fake";
  config_.vocab_size = options_.vocab_size;
  config_.max_position_embeddings = options_.max_position_embeddings;
  config_.eos_token_ids = {options_.vocab_size - 1};
}

void FakeRunner::allocate_kv_cache(int num_blocks, int block_size) {
  block_size_ = block_size;
  kv_.assign(size_t(num_blocks) * block_size, -1);
  block_step_.assign(num_blocks, -1);
  backed_blocks_ = num_blocks;
  most_backed_blocks_ = num_blocks;
}

void FakeRunner::reserve_kv_cache(int max_blocks, int block_size) {
  if (options_.elastic_chunk_blocks <= 0) {
    SynchronousRunner::reserve_kv_cache(max_blocks, block_size);
    return;
  }
  allocate_kv_cache(max_blocks, block_size);
  backed_blocks_ = 0;
  most_backed_blocks_ = 0;
}

int FakeRunner::kv_chunk_blocks() const {
  return options_.elastic_chunk_blocks > 0 ? options_.elastic_chunk_blocks
                                           : SynchronousRunner::kv_chunk_blocks();
}

int FakeRunner::back_kv_blocks(int blocks) {
  if (options_.elastic_chunk_blocks <= 0) return SynchronousRunner::back_kv_blocks(blocks);
  const int chunk = options_.elastic_chunk_blocks;
  const int pool = static_cast<int>(block_step_.size());
  int limit = options_.elastic_limit_blocks ? options_.elastic_limit_blocks->load() : pool;
  limit = std::min(limit / chunk * chunk, pool);
  int wanted = std::min((blocks + chunk - 1) / chunk * chunk, pool);
  backed_blocks_ = std::max(backed_blocks_.load(), std::min(wanted, limit));
  most_backed_blocks_ = std::max(most_backed_blocks_.load(), backed_blocks_.load());
  return backed_blocks_;
}

void FakeRunner::release_kv_blocks(int keep_blocks) {
  if (options_.elastic_chunk_blocks <= 0) return;
  const int chunk = options_.elastic_chunk_blocks;
  const int keep = std::min((keep_blocks + chunk - 1) / chunk * chunk, backed_blocks_.load());
  // Released memory comes back unwritten: a later read of it without a write throws.
  std::fill(kv_.begin() + int64_t(keep) * block_size_,
            kv_.begin() + int64_t(backed_blocks_.load()) * block_size_, -1);
  backed_blocks_ = keep;
}

void FakeRunner::compute(const engine::StepBatch& batch, engine::StepResult& result) {
  if (last_return_cpu_ns_ >= 0) caller_cpu_ns_ += thread_cpu_ns() - last_return_cpu_ns_;
  struct StampOnReturn {
    int64_t& stamp;
    ~StampOnReturn() { stamp = thread_cpu_ns(); }
  } stamp_on_return{last_return_cpu_ns_};
  if (options_.on_step) options_.on_step(batch);
  int64_t step = steps_.fetch_add(1);
  if (kv_.empty()) throw std::logic_error("forward before allocate_kv_cache");
  int64_t fed = 0;
  int64_t num_blocks = static_cast<int64_t>(block_step_.size());
  result.next_tokens.clear();
  result.logits.clear();
  for (const engine::SequenceWork& w : batch.sequences) {
    int64_t end = w.start_position + static_cast<int64_t>(w.tokens.size());
    if (w.tokens.empty()) throw std::logic_error("a sequence fed no tokens");
    if (static_cast<int64_t>(w.block_table.size()) * block_size_ < end) {
      throw std::logic_error("block table covers fewer than " + std::to_string(end) + " positions");
    }
    for (int32_t b : w.block_table) {
      if (b < 0 || b >= num_blocks) throw std::logic_error("block id out of range");
      if (b >= backed_blocks_) throw std::logic_error("a KV block with no memory behind it");
      if (block_step_[b] == step) throw std::logic_error("one KV block in two sequences of a step");
      block_step_[b] = step;
    }
    for (size_t i = 0; i < w.tokens.size(); ++i) {
      int64_t pos = w.start_position + static_cast<int64_t>(i);
      kv_[size_t(w.block_table[pos / block_size_]) * block_size_ + pos % block_size_] = w.tokens[i];
    }
    fed += static_cast<int64_t>(w.tokens.size());
    if (w.sample) result.next_tokens.push_back(next_token(w));
  }
  fill_logprobs(batch, result);
  if (batch.return_logits) {
    result.logits.assign(result.next_tokens.size() * size_t(config_.vocab_size), 0.0f);
    for (size_t r = 0; r < result.next_tokens.size(); ++r) {
      result.logits[r * config_.vocab_size + result.next_tokens[r]] = 1.0f;
    }
  }
  tokens_fed_ += fed;
  int n = static_cast<int>(batch.sequences.size());
  int seen = max_sequences_in_step_.load();
  while (n > seen && !max_sequences_in_step_.compare_exchange_weak(seen, n)) {
  }
  auto sleep = options_.step_time + options_.per_token_time * fed;
  if (sleep.count() > 0) std::this_thread::sleep_for(sleep);
}

void FakeRunner::fill_logprobs(const engine::StepBatch& batch, engine::StepResult& result) const {
  result.logprobs.clear();
  size_t row = 0;
  for (const engine::SequenceWork& w : batch.sequences) {
    if (!w.sample) continue;
    if (w.sampling.logprobs >= 0) {
      result.logprobs.resize(result.next_tokens.size() * engine::kLogprobsStride);
      engine::TokenLogprob* out = result.logprobs.data() + row * engine::kLogprobsStride;
      const int32_t token = result.next_tokens[row];
      out[0] = {token, -0.5f};
      for (int j = 0; j < w.sampling.logprobs; ++j) {
        out[1 + j] = {(token + j) % config_.vocab_size, -0.5f - float(j)};
      }
    }
    ++row;
  }
}

int32_t FakeRunner::next_token(const engine::SequenceWork& w) const {
  int64_t end = w.start_position + static_cast<int64_t>(w.tokens.size());
  uint64_t h = 0x2545f4914f6cdd1dull;
  for (int64_t pos = options_.hash_whole_context ? 0 : end - 1; pos < end; ++pos) {
    int32_t t = kv_[size_t(w.block_table[pos / block_size_]) * block_size_ + pos % block_size_];
    if (t < 0) throw std::logic_error("position " + std::to_string(pos) + " read before written");
    h = mix(h, uint64_t(t));
  }
  if (w.sampling.temperature > 0) h = mix(mix(h, w.sampling.seed), uint64_t(w.sampling.generated));
  auto suppressed = [&](int32_t t) {
    return std::find(w.sampling.suppressed_ids.begin(), w.sampling.suppressed_ids.end(), t) !=
           w.sampling.suppressed_ids.end();
  };
  if (options_.eos_one_in > 0 && h % options_.eos_one_in == 0 && !suppressed(eos_token())) {
    return eos_token();
  }
  int32_t token = static_cast<int32_t>((h >> 8) % uint64_t(config_.vocab_size - 1));
  while (suppressed(token)) token = (token + 1) % (config_.vocab_size - 1);
  return token;
}

}  // namespace gpufrac::fakes
