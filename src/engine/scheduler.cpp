#include "engine/scheduler.h"

#include <algorithm>
#include <stdexcept>

namespace gpufrac::engine {

namespace {
// Steps between the one that samples a sequence's last token and the first one that can use the
// blocks it frees: the engine delivers a step's tokens while the next step runs.
constexpr int64_t kReleaseLagSteps = 2;
}  // namespace

const char* kv_admission_name(KvAdmission admission) {
  return admission == KvAdmission::kReserve ? "reserve" : "optimistic";
}

KvAdmission parse_kv_admission(const std::string& name) {
  if (name == "reserve") return KvAdmission::kReserve;
  if (name == "optimistic") return KvAdmission::kOptimistic;
  throw std::invalid_argument("KV admission must be reserve or optimistic, got '" + name + "'");
}

Scheduler::Scheduler(SchedulerConfig config, KvBlockAllocator& allocator)
    : config_(config), allocator_(allocator) {
  if (config_.max_num_seqs <= 0 || config_.max_num_batched_tokens <= 0) {
    throw std::invalid_argument("Scheduler needs max_num_seqs > 0 and max_num_batched_tokens > 0");
  }
  if (config_.max_tokens_with_decodes != 0 &&
      config_.max_tokens_with_decodes < config_.max_num_seqs) {
    throw std::invalid_argument("Scheduler needs max_tokens_with_decodes 0 or >= max_num_seqs");
  }
  running_.reserve(config_.max_num_seqs);
  output_.chunks.reserve(config_.max_num_seqs);
}

int Scheduler::full_need(const Sequence* sequence) const {
  int64_t tokens_left = sequence->stop().max_tokens - sequence->num_generated();
  return allocator_.blocks_for_tokens(sequence->num_tokens() + std::max<int64_t>(tokens_left, 0));
}

void Scheduler::add(Sequence* sequence) {
  // The table's final size is known: growing it during steps then never allocates.
  sequence->block_table.reserve(full_need(sequence));
  sequence->status = SequenceStatus::kWaiting;
  sequence->arrival_order = next_arrival_++;
  waiting_.push_back(sequence);
}

const SchedulerOutput& Scheduler::schedule() {
  ++step_;
  output_.chunks.clear();
  output_.num_batched_tokens = 0;
  output_.num_preempted = 0;
  budget_left_ = config_.max_num_batched_tokens;
  settle_credit();

  // 1. Decodes, oldest first. An index loop: reserve_blocks may remove sequences from running_
  // (only the current one or newer ones, never those already visited).
  for (size_t i = 0; i < running_.size() && budget_left_ > 0;) {
    Sequence* s = running_[i];
    if (s->num_uncomputed() == 1 && s->scheduled_step != step_ && !s->reached_max_tokens()) {
      BlocksForStep got = reserve_blocks(s, s->num_computed + 1);
      if (got == BlocksForStep::kPreempted) continue;  // s left running_; i is the next one
      if (got == BlocksForStep::kGot) plan(s, 1);
    }
    ++i;
  }
  // A step that decodes takes prompt tokens only up to the smaller budget.
  if (output_.num_batched_tokens > 0 && config_.max_tokens_with_decodes > 0) {
    budget_left_ = std::min<int64_t>(
        budget_left_, config_.max_tokens_with_decodes - output_.num_batched_tokens);
  }
  // 2. Prompt chunks of running sequences (new prompts being chunked, or recomputes).
  for (size_t i = 0; i < running_.size() && budget_left_ > 0;) {
    Sequence* s = running_[i];
    if (s->scheduled_step != step_ && !s->reached_max_tokens()) {
      int64_t n = std::min(s->num_uncomputed(), budget_left_);
      BlocksForStep got = reserve_blocks(s, s->num_computed + n);
      if (got == BlocksForStep::kPreempted) continue;
      if (got == BlocksForStep::kGot) plan(s, n);
    }
    ++i;
  }
  // 3. Admission, strictly FCFS. Not after a preemption: the pool is short already (and so a
  //    sequence preempted in this pass, whose last token may still be a placeholder of the step
  //    in flight, is never recomputed in the same step: the engine relies on that).
  while (output_.num_preempted == 0 && !waiting_.empty() &&
         running_.size() < static_cast<size_t>(config_.max_num_seqs) && budget_left_ > 0) {
    Sequence* s = waiting_.front();
    int64_t n = std::min(s->num_uncomputed(), budget_left_);
    if (!admit(s, s->num_computed + n)) break;
    waiting_.pop_front();
    s->status = SequenceStatus::kRunning;
    insert_running(s);
    plan(s, n);
  }
  return output_;
}

bool Scheduler::admit(Sequence* sequence, int64_t num_tokens) {
  if (config_.admission == KvAdmission::kOptimistic &&
      sequence->num_preemptions < kMaxPreemptions) {
    return grow(sequence, num_tokens);
  }
  int need = full_need(sequence);
  int promise = need;
  if (need > spare_blocks() &&
      !allocator_.ensure_free(static_cast<int>(need + outstanding_blocks_))) {
    if (!can_start_on_credit(sequence, need)) return false;
    promise = static_cast<int>(spare_blocks());
    sequence->credit_blocks = need - promise;
  }
  sequence->reserved_blocks = promise;
  outstanding_blocks_ += promise;
  return grow(sequence, num_tokens);  // within the reservation: cannot fail
}

bool Scheduler::can_start_on_credit(const Sequence* sequence, int need) const {
  if (config_.admission != KvAdmission::kReserve) return false;
  const int64_t spare = spare_blocks();
  const int64_t tokens = sequence->num_tokens();
  if (allocator_.blocks_for_tokens(tokens + 1) > spare) return false;
  // Steps the sequence can run within the spare blocks, less the lag until freed blocks are usable.
  const int64_t runway = spare * allocator_.block_size() - tokens - kReleaseLagSteps;
  int64_t freed = 0;  // by fully promised decoding sequences that finish within the runway
  int64_t owed = 0;   // credit already given, counted against the same releases
  for (const Sequence* r : running_) {
    owed += r->credit_blocks;
    if (r->credit_blocks > 0 || r->reserved_blocks == 0 || r->num_uncomputed() > 1) continue;
    if (r->stop().max_tokens - r->num_generated() <= runway) freed += r->reserved_blocks;
  }
  return need - spare <= freed - owed;
}

void Scheduler::settle_credit() {
  int64_t owed = 0;
  for (const Sequence* s : running_) owed += s->credit_blocks;
  if (owed == 0) return;
  if (spare_blocks() < owed) allocator_.ensure_free(static_cast<int>(outstanding_blocks_ + owed));
  for (Sequence* s : running_) {
    if (s->credit_blocks == 0) continue;
    const int take = static_cast<int>(
        std::min<int64_t>(s->credit_blocks, std::max<int64_t>(spare_blocks(), 0)));
    if (take == 0) break;  // oldest first: a newer sequence does not overtake an older one
    pay_credit(s, take);
    outstanding_blocks_ += take;
  }
}

void Scheduler::pay_credit(Sequence* sequence, int blocks) {
  sequence->credit_blocks -= blocks;
  sequence->reserved_blocks += blocks;
}

bool Scheduler::grow(Sequence* sequence, int64_t num_tokens) {
  int missing = allocator_.blocks_missing(sequence->block_table, num_tokens);
  if (missing == 0) return true;
  int promised = std::max(0, sequence->reserved_blocks - int(sequence->block_table.size()));
  int from_promise = std::min(missing, promised);
  if (missing - from_promise > spare_blocks() &&
      !allocator_.ensure_free(static_cast<int>(missing - from_promise + outstanding_blocks_))) {
    return false;
  }
  if (!allocator_.grow(sequence->block_table, num_tokens)) return false;
  outstanding_blocks_ -= from_promise;
  // Blocks beyond the promise came from the spare ones: that much credit is paid.
  pay_credit(sequence, std::min(missing - from_promise, sequence->credit_blocks));
  return true;
}

Scheduler::BlocksForStep Scheduler::reserve_blocks(Sequence* sequence, int64_t num_tokens) {
  if (sequence->credit_blocks > 0) {
    // A sequence on credit never preempts: it waits for the blocks it was promised to come free.
    return grow(sequence, num_tokens) ? BlocksForStep::kGot : BlocksForStep::kWait;
  }
  while (!grow(sequence, num_tokens)) {
    // The newest sequence without a reservation that is not planned this step. A sequence with
    // a reservation never gets here (its blocks were promised); one without qualifies itself.
    auto victim = std::find_if(running_.rbegin(), running_.rend(), [&](const Sequence* s) {
      return s->scheduled_step != step_ && s->reserved_blocks == 0;
    });
    if (victim == running_.rend()) {
      throw std::logic_error("a sequence with a KV reservation ran out of blocks");
    }
    Sequence* v = *victim;
    preempt(v);
    if (v == sequence) return BlocksForStep::kPreempted;
  }
  return BlocksForStep::kGot;
}

void Scheduler::drop_reservation(Sequence* sequence) {
  outstanding_blocks_ -= std::max(0, sequence->reserved_blocks - int(sequence->block_table.size()));
  sequence->reserved_blocks = 0;
  sequence->credit_blocks = 0;
}

void Scheduler::preempt(Sequence* victim) {
  allocator_.release(victim->block_table);
  victim->num_computed = 0;
  victim->status = SequenceStatus::kWaiting;
  ++victim->num_preemptions;
  running_.erase(std::find(running_.begin(), running_.end(), victim));
  waiting_.push_front(victim);
  ++preemptions_total_;
  ++output_.num_preempted;
}

void Scheduler::plan(Sequence* sequence, int64_t num_tokens) {
  bool sample = sequence->num_computed + num_tokens == sequence->num_tokens();
  output_.chunks.push_back({sequence, sequence->num_computed, num_tokens, sample});
  sequence->scheduled_step = step_;
  budget_left_ -= num_tokens;
  output_.num_batched_tokens += num_tokens;
}

void Scheduler::insert_running(Sequence* sequence) {
  auto at = std::upper_bound(running_.begin(), running_.end(), sequence,
                             [](const Sequence* a, const Sequence* b) {
                               return a->arrival_order < b->arrival_order;
                             });
  running_.insert(at, sequence);
}

void Scheduler::complete_step() {
  for (const ScheduledChunk& c : output_.chunks) c.sequence->num_computed += c.num_tokens;
}

void Scheduler::finish(Sequence* sequence) {
  if (sequence->status == SequenceStatus::kRunning) {
    auto it = std::find(running_.begin(), running_.end(), sequence);
    if (it != running_.end()) running_.erase(it);
  } else if (sequence->status == SequenceStatus::kWaiting) {
    auto it = std::find(waiting_.begin(), waiting_.end(), sequence);
    if (it != waiting_.end()) waiting_.erase(it);
  }
  drop_reservation(sequence);
  allocator_.release(sequence->block_table);
  sequence->status = SequenceStatus::kFinished;
}

}  // namespace gpufrac::engine
