#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>

namespace gpufrac::engine {
namespace {

// Drives a Scheduler the way the engine does, without a runner: sampled chunks get a token
// derived from the sequence length; finished sequences leave, `finish_delay_steps` steps after
// their last token (as an engine that delivers tokens late). Checks the invariants every step.
class Harness {
 public:
  Harness(int num_blocks, int block_size, SchedulerConfig config, int finish_delay_steps = 0)
      : allocator(num_blocks, block_size),
        scheduler(config, allocator),
        config_(config),
        finish_delay_steps_(finish_delay_steps) {}

  Sequence* add(int prompt_len, int max_tokens) {
    std::vector<int32_t> prompt(prompt_len, 7);
    StopCriteria stop;
    stop.max_tokens = max_tokens;
    sequences.push_back(std::make_unique<Sequence>(next_id_++, prompt, stop, SamplingParams{},
                                                   std::span<const int32_t>{}));
    scheduler.add(sequences.back().get());
    return sequences.back().get();
  }

  const SchedulerOutput& step() {
    const SchedulerOutput& out = scheduler.schedule();
    check_invariants(out);
    scheduler.complete_step();
    for (const ScheduledChunk& c : out.chunks) {
      if (!c.sample) continue;
      Sequence* s = c.sequence;
      if (s->append_token(static_cast<int32_t>(s->num_tokens() % 100)) != FinishReason::kNone) {
        finishing_.push_back({steps + finish_delay_steps_, s});
      }
    }
    std::erase_if(finishing_, [&](const std::pair<int, Sequence*>& due) {
      if (due.first > steps) return false;
      finished.push_back(due.second->id());
      scheduler.finish(due.second);
      return true;
    });
    ++steps;
    return out;
  }

  int run_to_completion(int max_steps = 100000) {
    while (scheduler.has_work() && steps < max_steps) step();
    return steps;
  }

  void check_invariants(const SchedulerOutput& out) {
    ASSERT_LE(out.num_batched_tokens, config_.max_num_batched_tokens);
    ASSERT_LE(scheduler.num_running(), size_t(config_.max_num_seqs));
    std::set<int32_t> seen;
    int64_t held = 0;
    for (const auto& s : sequences) {
      if (s->status != SequenceStatus::kRunning) {
        ASSERT_TRUE(s->block_table.empty());
      }
      for (int32_t b : s->block_table) ASSERT_TRUE(seen.insert(b).second) << "block shared";
      held += static_cast<int64_t>(s->block_table.size());
      if (s->reserved_blocks > 0) {
        ASSERT_LE(int(s->block_table.size()), s->reserved_blocks) << "took an unpromised block";
      }
      if (s->credit_blocks > 0) ++credit_steps;
    }
    ASSERT_EQ(held, allocator.num_used_blocks());
    // Promised blocks are always there to be had: nobody else may take them.
    ASSERT_GE(scheduler.num_outstanding_blocks(), 0);
    ASSERT_LE(scheduler.num_outstanding_blocks(), allocator.num_free_blocks());
    std::set<const Sequence*> planned;
    int64_t tokens = 0;
    for (const ScheduledChunk& c : out.chunks) {
      ASSERT_TRUE(planned.insert(c.sequence).second) << "sequence planned twice";
      ASSERT_EQ(c.start, c.sequence->num_computed);
      ASSERT_GT(c.num_tokens, 0);
      ASSERT_LE(c.start + c.num_tokens, c.sequence->num_tokens());
      ASSERT_GE(int64_t(c.sequence->block_table.size()) * allocator.block_size(),
                c.start + c.num_tokens);
      ASSERT_EQ(c.sample, c.start + c.num_tokens == c.sequence->num_tokens());
      tokens += c.num_tokens;
    }
    ASSERT_EQ(tokens, out.num_batched_tokens);
  }

  KvBlockAllocator allocator;
  Scheduler scheduler;
  std::vector<std::unique_ptr<Sequence>> sequences;
  std::vector<uint64_t> finished;
  int steps = 0;
  int credit_steps = 0;  // (sequence, step) pairs with a sequence on credit

 private:
  SchedulerConfig config_;
  int finish_delay_steps_;
  std::vector<std::pair<int, Sequence*>> finishing_;  // (step due, sequence)
  uint64_t next_id_ = 0;
};

TEST(Scheduler, LongPromptIsChunkedWithinTheBudget) {
  Harness h(64, 16, {.max_num_seqs = 8, .max_num_batched_tokens = 32});
  Sequence* s = h.add(100, 2);
  std::vector<int64_t> chunks;
  for (int i = 0; i < 4; ++i) {
    const SchedulerOutput& out = h.step();
    ASSERT_EQ(out.chunks.size(), 1u);
    chunks.push_back(out.chunks[0].num_tokens);
    EXPECT_EQ(out.chunks[0].sample, i == 3);
  }
  EXPECT_EQ(chunks, (std::vector<int64_t>{32, 32, 32, 4}));
  EXPECT_EQ(s->num_generated(), 1);
  h.run_to_completion();
  EXPECT_EQ(s->num_generated(), 2);
  EXPECT_EQ(h.allocator.num_used_blocks(), 0);
}

TEST(Scheduler, DecodesGoFirstAndPromptsTakeTheRestOfTheBudget) {
  Harness h(256, 16, {.max_num_seqs = 16, .max_num_batched_tokens = 64});
  for (int i = 0; i < 4; ++i) h.add(8, 50);
  h.step();  // four prompts of 8 tokens in one step
  Sequence* big = h.add(1000, 4);
  for (int i = 0; i < 5; ++i) {
    const SchedulerOutput& out = h.step();
    ASSERT_EQ(out.chunks.size(), 5u);
    for (int d = 0; d < 4; ++d) EXPECT_EQ(out.chunks[d].num_tokens, 1) << "decode first";
    EXPECT_EQ(out.chunks[4].sequence, big);
    EXPECT_EQ(out.chunks[4].num_tokens, 60);
    EXPECT_EQ(out.num_batched_tokens, 64);
  }
}

TEST(Scheduler, StepsWithDecodesCutPromptsToTheirSmallerBudget) {
  Harness h(256, 16,
            {.max_num_seqs = 8, .max_num_batched_tokens = 64, .max_tokens_with_decodes = 16});
  h.add(30, 50);
  h.add(30, 50);
  EXPECT_EQ(h.step().num_batched_tokens, 60);  // no decode yet: the full budget
  Sequence* late = h.add(40, 4);
  std::vector<int64_t> chunks;
  for (int i = 0; i < 3; ++i) {
    const SchedulerOutput& out = h.step();
    ASSERT_EQ(out.chunks.size(), 3u);
    EXPECT_EQ(out.chunks[0].num_tokens, 1);
    EXPECT_EQ(out.chunks[1].num_tokens, 1);
    EXPECT_EQ(out.chunks[2].sequence, late);
    chunks.push_back(out.chunks[2].num_tokens);
  }
  EXPECT_EQ(chunks, (std::vector<int64_t>{14, 14, 12}));
  EXPECT_THROW(Scheduler({.max_num_seqs = 8, .max_num_batched_tokens = 64,
                          .max_tokens_with_decodes = 4},
                         h.allocator),
               std::invalid_argument);
}

TEST(Scheduler, MaxNumSeqsCapsTheRunningBatch) {
  Harness h(1024, 16, {.max_num_seqs = 3, .max_num_batched_tokens = 4096});
  for (int i = 0; i < 10; ++i) h.add(5, 3);
  const SchedulerOutput& out = h.step();
  EXPECT_EQ(out.chunks.size(), 3u);
  EXPECT_EQ(h.scheduler.num_running(), 3u);
  EXPECT_EQ(h.scheduler.num_waiting(), 7u);
  h.run_to_completion();
  std::vector<uint64_t> in_arrival_order;
  for (const auto& s : h.sequences) in_arrival_order.push_back(s->id());
  EXPECT_EQ(h.finished, in_arrival_order) << "equal requests finish in arrival order";
}

TEST(Scheduler, FirstComeFirstServedAndTheHeadIsNeverSkipped) {
  // 10 blocks of 4 tokens. `big` holds 9 while it decodes; `head` (3 blocks) waits, and
  // `small` (1 block, which would fit) must not pass it.
  Harness g(10, 4, {.max_num_seqs = 8, .max_num_batched_tokens = 1024});
  Sequence* big = g.add(32, 5);  // holds 8-9 blocks while decoding
  g.step();
  Sequence* head = g.add(12, 1);
  Sequence* small = g.add(1, 1);
  g.step();
  EXPECT_EQ(head->status, SequenceStatus::kWaiting);
  EXPECT_EQ(small->status, SequenceStatus::kWaiting) << "admitted past the FCFS head";
  g.run_to_completion();
  EXPECT_EQ(g.finished, (std::vector<uint64_t>{big->id(), head->id(), small->id()}));
}

TEST(Scheduler, ReserveAdmitsOnlyWhatCanFinishAndNeverPreempts) {
  // 6 blocks of 4 tokens; two sequences that each grow to 8 + 8 tokens (4 blocks each): the
  // second's prompt does not fit beside the first's reservation, so it waits for the first.
  Harness h(6, 4, {.max_num_seqs = 4, .max_num_batched_tokens = 64});
  Sequence* first = h.add(8, 8);
  Sequence* second = h.add(8, 8);
  h.step();
  EXPECT_EQ(first->reserved_blocks, 4);
  EXPECT_EQ(second->status, SequenceStatus::kWaiting);
  while (first->status != SequenceStatus::kFinished) {
    h.step();
    if (first->status != SequenceStatus::kFinished) {
      EXPECT_EQ(second->status, SequenceStatus::kWaiting) << "admitted before blocks were free";
    }
  }
  h.run_to_completion();
  EXPECT_EQ(h.finished, (std::vector<uint64_t>{first->id(), second->id()}));
  EXPECT_EQ(h.scheduler.num_preemptions_total(), 0u);
  EXPECT_EQ(second->num_generated(), 8);
  EXPECT_EQ(h.scheduler.num_outstanding_blocks(), 0);
  EXPECT_EQ(h.credit_steps, 0);
}

TEST(Scheduler, ReserveStartsTheNextPromptBesideTheLastTokensOfTheCurrentOne) {
  // 6 blocks of 4 tokens; two sequences of 4 + 12 tokens (4 blocks each). The second's prompt
  // fits in the 2 spare blocks, which hold it for 2 more steps after the lag: it starts on credit
  // once the first has at most 2 tokens left, never before, and nothing is preempted.
  Harness h(6, 4, {.max_num_seqs = 4, .max_num_batched_tokens = 64});
  Sequence* first = h.add(4, 12);
  Sequence* second = h.add(4, 12);
  bool overlapped = false;
  while (first->status != SequenceStatus::kFinished) {
    const int64_t first_left = 12 - first->num_generated();
    h.step();
    if (second->status == SequenceStatus::kRunning && first->status != SequenceStatus::kFinished) {
      overlapped = true;
      EXPECT_LE(first_left, 2) << "started on credit while the first was far from done";
    }
  }
  EXPECT_TRUE(overlapped);
  EXPECT_GT(h.credit_steps, 0);
  h.run_to_completion();
  EXPECT_EQ(h.finished, (std::vector<uint64_t>{first->id(), second->id()}));
  EXPECT_EQ(h.scheduler.num_preemptions_total(), 0u);
  EXPECT_EQ(second->num_generated(), 12);
  EXPECT_EQ(second->credit_blocks, 0);
  EXPECT_EQ(h.scheduler.num_outstanding_blocks(), 0);
}

TEST(Scheduler, ASequenceOnCreditWaitsForLateBlocksAndPreemptsNothing) {
  // As above, but the first's blocks come free 6 steps after its last token (more than the lag
  // the rule allows for): the second runs out of spare blocks and skips steps until they come.
  Harness h(6, 4, {.max_num_seqs = 4, .max_num_batched_tokens = 64}, 6);
  Sequence* first = h.add(4, 12);
  Sequence* second = h.add(4, 12);
  int second_skipped = 0;
  while (h.scheduler.has_work() && h.steps < 1000) {
    const SchedulerOutput& out = h.step();
    if (HasFatalFailure()) return;
    bool planned = std::any_of(out.chunks.begin(), out.chunks.end(),
                               [&](const ScheduledChunk& c) { return c.sequence == second; });
    if (second->status == SequenceStatus::kRunning && !planned) ++second_skipped;
  }
  EXPECT_GT(second_skipped, 0);
  EXPECT_EQ(h.finished, (std::vector<uint64_t>{first->id(), second->id()}));
  EXPECT_EQ(h.scheduler.num_preemptions_total(), 0u);
  EXPECT_EQ(second->num_generated(), 12);
  EXPECT_EQ(h.scheduler.num_outstanding_blocks(), 0);
}

TEST(Scheduler, OptimisticPreemptsTheNewestWhenBlocksRunOutAndRecomputesIt) {
  // 6 blocks of 4 tokens; two sequences that each grow to 4 + 12 tokens (4 blocks each).
  Harness h(6, 4, {.admission = KvAdmission::kOptimistic, .max_num_seqs = 4,
                   .max_num_batched_tokens = 64});
  Sequence* old_seq = h.add(4, 12);
  Sequence* new_seq = h.add(4, 12);
  bool saw_preemption = false;
  while (h.scheduler.has_work()) {
    const SchedulerOutput& out = h.step();
    if (out.num_preempted > 0) {
      saw_preemption = true;
      EXPECT_EQ(new_seq->num_computed, 0) << "the newest is preempted";
      EXPECT_TRUE(new_seq->block_table.empty());
      EXPECT_EQ(old_seq->status, SequenceStatus::kRunning);
    }
  }
  EXPECT_TRUE(saw_preemption);
  EXPECT_GT(new_seq->num_preemptions, 0);
  EXPECT_EQ(old_seq->num_preemptions, 0);
  EXPECT_EQ(old_seq->num_generated(), 12);
  EXPECT_EQ(new_seq->num_generated(), 12);
  EXPECT_EQ(h.scheduler.num_preemptions_total(), uint64_t(new_seq->num_preemptions));
  EXPECT_EQ(h.allocator.num_used_blocks(), 0);
}

TEST(Scheduler, OptimisticPreemptsASequenceAtMostTwiceThenReservesForIt) {
  // 8 blocks of 4 tokens, four sequences of 4 + 24 tokens (7 blocks each): under vLLM's rule
  // they would preempt each other again and again.
  Harness h(8, 4, {.admission = KvAdmission::kOptimistic, .max_num_seqs = 4,
                   .max_num_batched_tokens = 64});
  for (int i = 0; i < 4; ++i) h.add(4, 24);
  h.run_to_completion();
  EXPECT_FALSE(h.scheduler.has_work());
  EXPECT_GT(h.scheduler.num_preemptions_total(), 0u);
  for (const auto& s : h.sequences) {
    EXPECT_LE(s->num_preemptions, kMaxPreemptions) << "sequence " << s->id();
    EXPECT_EQ(s->num_generated(), 24);
  }
  EXPECT_EQ(h.allocator.num_used_blocks(), 0);
}

TEST(Scheduler, KvAdmissionNames) {
  EXPECT_EQ(parse_kv_admission("reserve"), KvAdmission::kReserve);
  EXPECT_EQ(parse_kv_admission(kv_admission_name(KvAdmission::kOptimistic)),
            KvAdmission::kOptimistic);
  EXPECT_THROW(parse_kv_admission("greedy"), std::invalid_argument);
}

TEST(Scheduler, FinishFreesBlocksFromRunningAndWaiting) {
  Harness h(8, 4, {.max_num_seqs = 1, .max_num_batched_tokens = 64});
  Sequence* running = h.add(10, 20);
  Sequence* waiting = h.add(10, 20);
  h.step();
  EXPECT_EQ(h.allocator.num_used_blocks(), 3);
  h.scheduler.finish(waiting);
  h.scheduler.finish(running);
  EXPECT_EQ(h.allocator.num_used_blocks(), 0);
  EXPECT_FALSE(h.scheduler.has_work());
}

// Random arrivals, lengths and cancellations on small pools, under both KV admission rules: the
// invariants hold every step, every request that was not cancelled gets exactly max_tokens, no
// block leaks, reserve never preempts and optimistic preempts a sequence at most twice.
TEST(Scheduler, RandomWorkloadsKeepInvariantsAndLeakNothing) {
  std::mt19937 rng(1234);
  int credit_steps = 0;
  for (int round = 0; round < 60; ++round) {
    KvAdmission admission = round % 2 ? KvAdmission::kOptimistic : KvAdmission::kReserve;
    int block_size = 1 << (rng() % 5);
    int max_len = 64;
    int num_blocks = (max_len + block_size - 1) / block_size + int(rng() % 40);
    SchedulerConfig config{.admission = admission,
                           .max_num_seqs = 1 + int(rng() % 16),
                           .max_num_batched_tokens = 16 + int(rng() % 100)};
    Harness h(num_blocks, block_size, config, int(rng() % 2));  // the engine delivers 0-1 steps late
    std::map<uint64_t, int> expected;  // id -> max_tokens, for those not cancelled
    std::set<uint64_t> cancelled;
    for (int t = 0; t < 400; ++t) {
      if (rng() % 3 == 0 && h.sequences.size() < 60) {
        int prompt = 1 + int(rng() % 40);
        int max_tokens = 1 + int(rng() % (max_len - prompt));
        Sequence* s = h.add(prompt, max_tokens);
        expected[s->id()] = max_tokens;
      }
      if (rng() % 17 == 0 && !h.sequences.empty()) {
        Sequence* s = h.sequences[rng() % h.sequences.size()].get();
        if (s->status != SequenceStatus::kFinished) {
          h.scheduler.finish(s);
          cancelled.insert(s->id());
          expected.erase(s->id());
        }
      }
      if (h.scheduler.has_work()) h.step();
      if (HasFatalFailure()) return;
    }
    h.run_to_completion();
    EXPECT_FALSE(h.scheduler.has_work()) << "round " << round;
    credit_steps += h.credit_steps;
    EXPECT_EQ(h.allocator.num_used_blocks(), 0) << "round " << round;
    EXPECT_EQ(h.scheduler.num_outstanding_blocks(), 0) << "round " << round;
    if (admission == KvAdmission::kReserve) {
      EXPECT_EQ(h.scheduler.num_preemptions_total(), 0u) << "round " << round;
    }
    for (const auto& s : h.sequences) {
      EXPECT_LE(s->num_preemptions, kMaxPreemptions) << "round " << round;
      if (cancelled.count(s->id())) continue;
      EXPECT_EQ(s->num_generated(), expected[s->id()]) << "round " << round;
    }
  }
  EXPECT_GT(credit_steps, 0) << "no workload started a sequence on credit";
}

}  // namespace
}  // namespace gpufrac::engine
