// Scheduler: continuous batching in the style of vLLM v1. Every step has a token budget
// (max_num_batched_tokens, or the smaller max_tokens_with_decodes once the step carries a
// decode) and a cap on running sequences (max_num_seqs). A step is planned as:
//   1. running sequences that decode (one known token left to feed), oldest first;
//   2. running sequences still in their prompt, oldest first, each a chunk of at most the
//      remaining budget (chunked prefill: a long prompt cannot stall everyone's decode);
//   3. waiting sequences in arrival order (FCFS), admitted while a sequence slot, budget and KV
//      blocks are free. The head of the queue is never skipped.
// KV admission (SchedulerConfig::admission):
// - kReserve (the default): a sequence is admitted only when every block it can ever need
//   (prompt + max_tokens) is free beside what the running sequences were promised; the promise
//   is kept in Sequence::reserved_blocks. Running sequences then never run short, nothing is
//   preempted, and a pool too small for the offered load makes requests queue instead of thrash.
//   Overlap: the head of the queue is also admitted when its prompt fits in the spare blocks and
//   running sequences that finish before it outgrows them (each at most max_tokens away) will
//   free the rest; that rest is its credit (Sequence::credit_blocks), promised as blocks come
//   free. A sequence on credit that would need an unpromised block skips its step instead (it
//   never preempts), so a pool that holds 1.5 sequences runs the next prompt beside the last
//   tokens of the current one instead of after them.
// - kOptimistic (vLLM's rule): admitted when the blocks of the first chunk are free. A running
//   sequence that needs a block when none is spare preempts the newest running sequence without
//   a reservation that is not yet planned this step (possibly itself): its blocks are freed and it
//   goes back to the front of the waiting queue, to be recomputed from its known tokens
//   (preemption by recompute). Bounded: a sequence preempted kMaxPreemptions times is admitted
//   again only with a full reservation, and a reserved sequence is never a victim.
// A running sequence whose pending token (sequence.h) is its last (max_tokens) is not planned:
// the engine finishes it when that token's step is collected.
//
// Sequences are owned by the caller (the engine); the scheduler keeps pointers from add() until
// finish(). Not thread-safe. schedule() allocates nothing once the containers have grown to their
// working size.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "engine/kv_block_allocator.h"
#include "engine/sequence.h"

namespace gpufrac::engine {

// What `gpufrac serve` gives max_tokens_with_decodes when not told (or max_num_seqs if larger).
inline constexpr int kDefaultMaxTokensWithDecodes = 512;

enum class KvAdmission { kReserve, kOptimistic };
// "reserve" | "optimistic" (the names of `--kv-admission`); parse throws std::invalid_argument.
const char* kv_admission_name(KvAdmission admission);
KvAdmission parse_kv_admission(const std::string& name);

// How often kOptimistic may preempt one sequence before it gets a full reservation.
inline constexpr int kMaxPreemptions = 2;

struct SchedulerConfig {
  KvAdmission admission = KvAdmission::kReserve;
  int max_num_seqs = 256;
  int max_num_batched_tokens = 8192;
  // Budget of a step that carries at least one decode, decodes included (0: the same as
  // max_num_batched_tokens). Smaller, it cuts prompts into chunks while others decode, so a
  // decode never waits behind a step of whole prompts; it must be at least max_num_seqs.
  int max_tokens_with_decodes = 0;
};

struct ScheduledChunk {
  Sequence* sequence;
  int64_t start;       // first position fed (= sequence->num_computed when planned)
  int64_t num_tokens;  // fed this step
  bool sample;         // the chunk ends the known tokens: the runner samples the next one
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;  // decodes first, then prompt chunks
  int64_t num_batched_tokens = 0;
  int num_preempted = 0;  // preemptions while planning this step
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, KvBlockAllocator& allocator);

  // Queues a new sequence (status kWaiting) behind every waiting one.
  void add(Sequence* sequence);
  // Plans the next step. The output stays valid until the next schedule(); a chunk's sequence
  // pointer dangles once the caller frees that sequence.
  const SchedulerOutput& schedule();
  // After the runner executed the planned step: the fed tokens now have K/V in the cache. Call
  // once per schedule(), before appending the sampled tokens.
  void complete_step();
  // Removes a sequence (finished, cancelled or failed) wherever it is and frees its KV blocks.
  void finish(Sequence* sequence);

  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  size_t num_running() const { return running_.size(); }
  size_t num_waiting() const { return waiting_.size(); }
  uint64_t num_preemptions_total() const { return preemptions_total_; }
  // Blocks promised to running sequences and not yet in their tables.
  int64_t num_outstanding_blocks() const { return outstanding_blocks_; }
  const SchedulerConfig& config() const { return config_; }
  const KvBlockAllocator& allocator() const { return allocator_; }

 private:
  enum class BlocksForStep { kGot, kWait, kPreempted };
  // Gives `sequence` the blocks to hold `num_tokens` positions, preempting newer unplanned
  // sequences without a reservation while the pool is short. kPreempted when `sequence` itself
  // had to be; kWait when it is on credit and its promised blocks are not free yet (it skips
  // this step and keeps its place).
  BlocksForStep reserve_blocks(Sequence* sequence, int64_t num_tokens);
  // Grows the table from the sequence's own reservation, or else from the blocks nobody was
  // promised. False, changing nothing, when those are too few.
  bool grow(Sequence* sequence, int64_t num_tokens);
  // Admits the head of the waiting queue with its first chunk, if its KV rule allows.
  bool admit(Sequence* sequence, int64_t num_tokens);
  // Every block `sequence` can ever need: prompt + max_tokens.
  int full_need(const Sequence* sequence) const;
  int64_t spare_blocks() const { return allocator_.num_free_blocks() - outstanding_blocks_; }
  // kReserve's overlap rule: whether `sequence` (needing `need` blocks, more than are spare) may
  // start now on credit.
  bool can_start_on_credit(const Sequence* sequence, int need) const;
  // Turns the running sequences' credit into promises while spare blocks allow, oldest first.
  void settle_credit();
  // Moves `blocks` of the sequence's credit into its reservation.
  void pay_credit(Sequence* sequence, int blocks);
  void drop_reservation(Sequence* sequence);
  void preempt(Sequence* victim);
  void plan(Sequence* sequence, int64_t num_tokens);
  void insert_running(Sequence* sequence);  // keeps running_ in arrival order

  SchedulerConfig config_;
  KvBlockAllocator& allocator_;
  std::vector<Sequence*> running_;  // arrival order
  std::deque<Sequence*> waiting_;   // preempted ones at the front, new ones at the back
  SchedulerOutput output_;
  int64_t step_ = 0;
  int64_t budget_left_ = 0;
  uint64_t next_arrival_ = 0;
  uint64_t preemptions_total_ = 0;
  int64_t outstanding_blocks_ = 0;  // promised to running sequences, not yet in their tables
};

}  // namespace gpufrac::engine
