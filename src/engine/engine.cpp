#include "engine/engine.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>

#include "common/clock.h"
#include "common/log.h"
#include "common/seeded_random.h"

namespace gpufrac::engine {

namespace {

// After the device refuses KV memory, how long the engine waits before asking again: 10-30 ms,
// drawn per refusal, so that engines waiting for the same memory do not ask in lockstep.
constexpr int64_t kKvRetryNs = 20'000'000;

int64_t kv_retry_delay_ns(uint64_t engine_seed, uint64_t refusal) {
  return kKvRetryNs / 2 + int64_t(splitmix64_nth(engine_seed, refusal) % uint64_t(kKvRetryNs));
}

void check_request(const EngineRequest& r, const ModelConfig& config, int max_model_len) {
  if (r.prompt.empty()) throw std::invalid_argument("empty prompt");
  if (r.n < 1) throw std::invalid_argument("n must be at least 1");
  for (int32_t t : r.prompt) {
    if (t < 0 || t >= config.vocab_size) throw std::invalid_argument("token id out of vocabulary");
  }
  if (r.stop.max_tokens < 1 || r.stop.min_tokens < 0 || r.stop.min_tokens > r.stop.max_tokens) {
    throw std::invalid_argument("need 0 <= min_tokens <= max_tokens and max_tokens >= 1");
  }
  if (static_cast<int64_t>(r.prompt.size()) + r.stop.max_tokens > max_model_len) {
    throw std::invalid_argument("prompt + max_tokens exceeds max_model_len");
  }
  for (const LogitBias& b : r.logit_bias) {
    if (b.id < 0 || b.id >= config.vocab_size) {
      throw std::invalid_argument("logit_bias id out of vocabulary");
    }
  }
  if (r.logprobs < -1 || r.logprobs > kMaxTopLogprobs) {
    throw std::invalid_argument("logprobs must be in [-1, kMaxTopLogprobs]");
  }
}

}  // namespace

Engine::Engine(ModelRunner& runner, EngineOptions options)
    : runner_(runner),
      options_(options),
      allocator_(options.num_kv_blocks, options.block_size, options.elastic_kv ? 0 : -1),
      scheduler_(options.scheduler, allocator_),
      metrics_({.max_model_len = options.max_model_len,
                .block_size = options.block_size,
                .num_kv_blocks = options.num_kv_blocks,
                .kv_block_bytes = runner.kv_block_bytes(options.block_size)}) {
  if (allocator_.blocks_for_tokens(options_.max_model_len) > options_.num_kv_blocks) {
    throw std::invalid_argument("the KV pool cannot hold one sequence of max_model_len tokens");
  }
  if (options_.elastic_kv) {
    runner_.reserve_kv_cache(options_.num_kv_blocks, options_.block_size);
    allocator_.set_backing([this](int total) { return back_kv(total); });
  } else {
    runner_.allocate_kv_cache(options_.num_kv_blocks, options_.block_size);
  }
  batch_.sequences.reserve(options_.scheduler.max_num_seqs);
  result_.next_tokens.reserve(options_.scheduler.max_num_seqs);
}

Engine::~Engine() {
  stop();
}

void Engine::start() {
  std::lock_guard lock(mutex_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { loop(); });
}

void Engine::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Engine::Admission Engine::submit(uint64_t id, EngineRequest request,
                                 std::shared_ptr<RequestSink> sink) {
  check_request(request, runner_.config(), options_.max_model_len);
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return Admission::kStopped;
    int64_t waiting = scheduler_waiting_.load() + static_cast<int64_t>(incoming_.size());
    if (waiting >= options_.max_waiting_requests) {
      ++metrics_.requests_rejected_total;
      return Admission::kQueueFull;
    }
    incoming_.push_back({id, std::move(request), std::move(sink), monotonic_ns()});
  }
  wake_.notify_one();
  return Admission::kAccepted;
}

void Engine::cancel(uint64_t id) {
  finish_early(id, FinishReason::kCancelled);
}

void Engine::stop_request(uint64_t id) {
  finish_early(id, FinishReason::kStop);
}

void Engine::finish_early(uint64_t id, FinishReason reason) {
  {
    std::lock_guard lock(mutex_);
    early_finishes_.push_back({id, reason});
  }
  wake_.notify_one();
}

void Engine::loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      auto news = [&] {
        return stopping_ || !incoming_.empty() || !early_finishes_.empty() ||
               (scheduler_.has_work() && !waiting_for_kv_) || in_flight_count_ > 0;
      };
      const int64_t wake_at = next_wake_ns();
      if (wake_at == 0) {
        wake_.wait(lock, news);
      } else {
        wake_.wait_for(lock, std::chrono::nanoseconds(std::max<int64_t>(wake_at - monotonic_ns(), 0)),
                       news);
      }
      if (stopping_) break;
      incoming_local_.swap(incoming_);
      early_finishes_local_.swap(early_finishes_);
      // Counted as waiting until admitted below: keeps submit()'s cap exact across the swap.
      scheduler_waiting_ += static_cast<int64_t>(incoming_local_.size());
    }
    for (Pending& p : incoming_local_) admit(p);
    incoming_local_.clear();
    // After admission, so that a cancel racing its own submit finds the request.
    for (const EarlyFinish& f : early_finishes_local_) {
      if (f.reason == FinishReason::kCancelled) {
        finish_request(f.id, f.reason);
      } else {
        finish(f.id, f.reason);
      }
    }
    early_finishes_local_.clear();
    bool submitted = scheduler_.has_work() && submit_step();
    // One step stays on the device while the previous one's tokens are delivered.
    if (in_flight_count_ > (submitted && runner_.runs_ahead() ? 1 : 0)) collect_step();
    waiting_for_kv_ = !submitted && in_flight_count_ == 0 && scheduler_.has_work();
    if (options_.elastic_kv && in_flight_count_ == 0) release_idle_kv(monotonic_ns());
    publish_gauges();
  }
  // The runner keeps nothing of this engine outstanding; the steps' tokens are not delivered.
  while (in_flight_count_ > 0) {
    pop_oldest_step();
    try {
      runner_.collect(result_);
    } catch (const std::exception& e) {
      log_error("engine: collecting a step while stopping: ", e.what());
    }
  }
  std::vector<uint64_t> ids;
  for (const auto& [id, active] : active_) ids.push_back(id);
  for (uint64_t id : ids) finish(id, FinishReason::kCancelled);
  {
    std::lock_guard lock(mutex_);
    incoming_local_.swap(incoming_);
  }
  for (Pending& p : incoming_local_) p.sink->on_finish({FinishReason::kCancelled, 0, 0, {}});
  incoming_local_.clear();
}

void Engine::admit(Pending& p) {
  const EngineRequest& r = p.request;
  SamplingParams sampling;
  sampling.temperature = r.temperature;
  sampling.top_k = r.top_k;
  sampling.top_p = r.top_p;
  sampling.min_p = r.min_p;
  sampling.penalties = r.penalties;
  sampling.logprobs = r.logprobs;
  sampling.generated = r.resumed_tokens;  // the draw this run starts at
  requests_[p.id] = Request{r.n, r.n, {}};
  for (int choice = 0; choice < r.n; ++choice) {
    const uint64_t id = p.id + uint64_t(choice);
    const bool last = choice + 1 == r.n;  // takes the request's prompt and stop rules
    sampling.seed = r.seed ? *r.seed + uint64_t(choice) : mix_seed(options_.seed, id);
    LogitAdjustmentTable adjustments(r.prompt, r.logit_bias, r.penalties);
    auto sequence =
        std::make_unique<Sequence>(id, last ? std::move(p.request.prompt) : r.prompt,
                                   last ? std::move(p.request.stop) : r.stop, sampling,
                                   runner_.config().eos_token_ids, std::move(adjustments));
    scheduler_.add(sequence.get());
    active_[id] = Active{std::move(sequence), p.sink, {.arrival_ns = p.arrival_ns}, r.logprobs,
                         p.id, choice};
  }
}

bool Engine::submit_step() {
  const SchedulerOutput& out = scheduler_.schedule();
  metrics_.num_preemptions_total += out.num_preempted;
  // A chunk from position 0 is a request's first step (or a recompute: the first time stays).
  for (const ScheduledChunk& c : out.chunks) {
    if (c.start != 0) continue;
    metrics_.observe_scheduled(active_.at(c.sequence->id()).times, monotonic_ns());
  }
  publish_gauges();  // admissions and preemptions show while the step runs
  if (out.chunks.empty()) return false;
  const int64_t step = steps_submitted_;
  InFlightStep& record = in_flight_[steps_submitted_ % 2];
  record.ids.clear();
  record.sampled.clear();
  record.wants_logprobs = false;
  for (const ScheduledChunk& c : out.chunks) record.ids.push_back(c.sequence->id());
  batch_.sequences.clear();
  try {
    for (const ScheduledChunk& c : out.chunks) {
      const Sequence& s = *c.sequence;
      SequenceWork work;
      work.tokens = std::span<const int32_t>(s.tokens()).subspan(c.start, c.num_tokens);
      work.start_position = static_cast<int32_t>(c.start);
      work.block_table = s.block_table;
      work.sample = c.sample;
      work.sampling = s.sampling_for_step();
      if (c.start + c.num_tokens > s.num_tokens() - s.num_pending()) {
        // Feeds a placeholder: it must be the one sampled by the step submitted just before.
        if (s.num_pending() != 1 || s.newest_pending_step() != step - 1) {
          throw std::logic_error("engine: request " + std::to_string(s.id()) +
                                 " feeds a token of an older step that is still pending");
        }
        work.previous_sample_row = s.newest_pending_row();
      }
      batch_.sequences.push_back(work);
    }
    runner_.submit(batch_);
  } catch (const std::exception& e) {
    // The step's requests fail; everyone else keeps being served.
    log_error("engine: step submission failed, failing ", record.ids.size(),
              " requests: ", e.what());
    fail_requests(record.ids, e.what());
    return false;
  }
  // The device runs steps in order: for planning the next one, these tokens are computed.
  scheduler_.complete_step();
  for (const ScheduledChunk& c : out.chunks) {
    if (!c.sample) continue;
    c.sequence->append_pending_token(step, static_cast<int32_t>(record.sampled.size()));
    record.sampled.push_back(c.sequence->id());
  }
  for (const SequenceWork& work : batch_.sequences) {
    record.wants_logprobs |= work.sample && work.sampling.logprobs >= 0;
  }
  ++steps_submitted_;
  ++in_flight_count_;
  return true;
}

Engine::InFlightStep& Engine::pop_oldest_step() {
  InFlightStep& step = in_flight_[(steps_submitted_ - in_flight_count_) % 2];
  --in_flight_count_;
  return step;
}

void Engine::collect_step() {
  InFlightStep& step = pop_oldest_step();
  try {
    runner_.collect(result_);
    if (result_.next_tokens.size() != step.sampled.size()) {
      throw std::runtime_error("runner returned " + std::to_string(result_.next_tokens.size()) +
                               " tokens for " + std::to_string(step.sampled.size()) +
                               " sampled sequences");
    }
    if (step.wants_logprobs &&
        result_.logprobs.size() != step.sampled.size() * size_t(kLogprobsStride)) {
      throw std::runtime_error("runner returned no logprobs for a step that asked for them");
    }
  } catch (const std::exception& e) {
    log_error("engine: step failed, failing ", step.ids.size(), " requests: ", e.what());
    fail_requests(step.ids, e.what());
    return;
  }
  int64_t now = monotonic_ns();
  for (size_t row = 0; row < step.sampled.size(); ++row) {
    auto it = active_.find(step.sampled[row]);
    if (it == active_.end()) continue;  // finished or cancelled since the step was submitted
    Active& a = it->second;
    Sequence* s = a.sequence.get();
    int32_t token = result_.next_tokens[row];
    metrics_.observe_token(a.times, s->prompt_len(), now);
    FinishReason reason = s->resolve_pending_token(token);
    GeneratedToken generated{a.choice, token, reason, {}};
    if (a.logprobs >= 0) {
      generated.logprobs = std::span<const TokenLogprob>(result_.logprobs)
                               .subspan(row * kLogprobsStride, size_t(1 + a.logprobs));
    }
    a.sink->on_token(generated);
    if (reason != FinishReason::kNone) finish(s->id(), reason);
  }
}

void Engine::fail_requests(const std::vector<uint64_t>& choice_ids, const std::string& error) {
  for (uint64_t id : choice_ids) {
    auto it = active_.find(id);
    if (it != active_.end()) finish_request(it->second.request_id, FinishReason::kError, error);
  }
}

void Engine::finish_request(uint64_t request_id, FinishReason reason, const std::string& error) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  const int choices = it->second.choices;  // `it` dies with the last choice
  for (int choice = 0; choice < choices; ++choice) {
    finish(request_id + uint64_t(choice), reason, error);
  }
}

void Engine::finish(uint64_t choice_id, FinishReason reason, std::string error) {
  auto it = active_.find(choice_id);
  if (it == active_.end()) return;
  Active& a = it->second;
  scheduler_.finish(a.sequence.get());
  auto request = requests_.find(a.request_id);
  RequestOutcome& outcome = request->second.outcome;
  outcome.prompt_tokens = a.sequence->prompt_len();
  outcome.completion_tokens += a.sequence->num_output_tokens();
  if (reason == FinishReason::kError) {
    if (outcome.reason != FinishReason::kError) outcome.error = std::move(error);
    outcome.reason = reason;
  } else if (outcome.reason != FinishReason::kError &&
             (reason == FinishReason::kCancelled || outcome.reason != FinishReason::kCancelled)) {
    outcome.reason = reason;
  }
  const RequestTimes times = a.times;
  const int64_t max_tokens = a.sequence->stop().max_tokens;
  std::shared_ptr<RequestSink> sink = std::move(a.sink);
  active_.erase(it);
  if (--request->second.open > 0) return;
  RequestOutcome finished = std::move(outcome);
  requests_.erase(request);
  metrics_.observe_finish(
      times, {finished.reason, finished.prompt_tokens, finished.completion_tokens, max_tokens},
      monotonic_ns());
  publish_gauges();  // whoever hears of the finish sees its blocks freed
  sink->on_finish(finished);
}

void Engine::publish_gauges() {
  int64_t waiting = static_cast<int64_t>(scheduler_.num_waiting());
  scheduler_waiting_ = waiting;
  metrics_.num_requests_running = static_cast<int64_t>(scheduler_.num_running());
  metrics_.num_requests_waiting = waiting;
  metrics_.kv_cache_blocks_used = allocator_.num_used_blocks();
  metrics_.kv_cache_blocks_backed = allocator_.backed_blocks();
}

int Engine::back_kv(int total_blocks) {
  const int64_t now = monotonic_ns();
  if (now < kv_retry_after_ns_) return allocator_.backed_blocks();
  const int before = allocator_.backed_blocks();
  const int backed = runner_.back_kv_blocks(total_blocks);
  if (backed < total_blocks) {
    // All or nothing: what was mapped toward a need the device cannot meet goes back at once.
    // Engines that wait for memory while holding part of it would wait for each other forever.
    if (backed > before) runner_.release_kv_blocks(before);
    const uint64_t refusal = ++metrics_.kv_backing_refusals_total;
    // Seeded by the process and the engine, so that engines of different processes differ.
    kv_retry_after_ns_ =
        now + kv_retry_delay_ns((uint64_t(getpid()) << 32) ^ reinterpret_cast<uintptr_t>(this), refusal);
    return before;
  }
  kv_surplus_since_ns_ = 0;
  return backed;
}

void Engine::release_idle_kv(int64_t now_ns) {
  // Blocks are handed out lowest first, so what stays backed is the blocks in use and what the
  // running sequences were promised (which take the free ids below the extent first).
  const int64_t needed = std::max<int64_t>(
      allocator_.used_extent(), allocator_.num_used_blocks() + scheduler_.num_outstanding_blocks());
  const int64_t chunk = std::max(runner_.kv_chunk_blocks(), 1);
  const int keep = static_cast<int>(
      std::min<int64_t>((needed + chunk - 1) / chunk * chunk, allocator_.backed_blocks()));
  if (keep >= allocator_.backed_blocks()) {
    kv_surplus_since_ns_ = 0;
    return;
  }
  if (kv_surplus_since_ns_ == 0) {
    kv_surplus_since_ns_ = now_ns;
    return;
  }
  if (now_ns - kv_surplus_since_ns_ < options_.kv_release_delay_ms * 1'000'000) return;
  runner_.release_kv_blocks(keep);
  allocator_.shrink_backed(keep);
  kv_surplus_since_ns_ = 0;
}

int64_t Engine::next_wake_ns() const {
  if (waiting_for_kv_) return std::max(kv_retry_after_ns_, monotonic_ns() + kKvRetryNs / 4);
  if (kv_surplus_since_ns_ != 0) {
    return kv_surplus_since_ns_ + options_.kv_release_delay_ms * 1'000'000;
  }
  return 0;
}

}  // namespace gpufrac::engine
