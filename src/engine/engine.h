// Engine: the loop thread that drives a ModelRunner. It takes new requests and cancellations from
// any thread, and per step runs scheduler -> runner -> hands each sampled token to its request's
// sink, finishing requests on their stop rules. It owns the KV block allocator and the
// scheduler; the runner (and its KV memory, allocated here once) is borrowed and must outlive it.
//
// Steps are pipelined (runner.h) when the runner runs ahead (ModelRunner::runs_ahead): the loop
// schedules and submits step n+1, then collects step n and delivers its tokens, so the device
// never waits for the CPU's per-step work; otherwise each step is collected at once. Step n+1 feeds
// step n's samples as placeholders (Sequence::kPendingToken) that the runner resolves on the
// device. A request that step n finishes (EOS, stop id) may already be in step n+1: that step's
// token for it is dropped. Requests that reach max_tokens are not scheduled past their last token.
//
// A request with n choices (EngineRequest::n) is n sequences of the same prompt, scheduled on
// their own, under the request's n consecutive ids (new_request_id(n)): choice i is id + i, with
// seed + i when the request brings a seed. Their tokens go to the one sink with their choice index;
// the sink hears on_finish once, when the last choice has finished.
//
// Thread-safety: submit(), cancel(), stop_request(), metrics() and the accessors may be called
// from any thread (stop_request() also from a sink's on_token).
// Sinks are called on the engine thread only, in order (tokens, then exactly one on_finish), and
// must not block: they hand bytes to an HTTP response and return.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/kv_block_allocator.h"
#include "engine/metrics.h"
#include "engine/model/runner.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"

namespace gpufrac::engine {

struct EngineOptions {
  int num_kv_blocks = 0;
  int block_size = 16;
  int max_model_len = 0;  // prompt + max_tokens at most (checked by submit)
  SchedulerConfig scheduler;
  int max_waiting_requests = 4096;  // submit() refuses more than this many waiting requests
  uint64_t seed = 0;                // seeds requests that bring no seed of their own
};

struct EngineRequest {
  std::vector<int32_t> prompt;  // token ids, non-empty, each in [0, vocab_size)
  StopCriteria stop;
  float temperature = 1;
  int top_k = 0;
  float top_p = 1;
  float min_p = 0;
  std::optional<uint64_t> seed;
  Penalties penalties;
  std::vector<LogitBias> logit_bias;  // ids in [0, vocab_size); a repeated id: the last bias
  int logprobs = -1;                  // SamplingParams::logprobs
  int n = 1;                          // choices: sequences generated from the prompt (>= 1)
};

// How a request ended, over all its choices: kError if one failed, else kCancelled if one was
// cancelled, else the reason of the last choice to finish (kStop, kLength).
struct RequestOutcome {
  FinishReason reason = FinishReason::kNone;
  int64_t prompt_tokens = 0;      // the prompt's length (once, however many choices)
  int64_t completion_tokens = 0;  // summed over the choices
  std::string error;              // for kError
};

// One sampled token, as the engine hands it to the request's sink.
struct GeneratedToken {
  int choice = 0;  // which of the request's n choices, in [0, n)
  int32_t id = 0;
  FinishReason finish = FinishReason::kNone;  // set (kStop, kLength) on the choice's last token
  // Empty unless the request asked for logprobs (EngineRequest::logprobs = k >= 0): then 1 + k
  // entries, the sampled token's and the k most likely ids' (runner.h TokenLogprob).
  std::span<const TokenLogprob> logprobs;
};

class RequestSink {
 public:
  virtual ~RequestSink() = default;
  // A sampled token (the span is valid during the call only).
  virtual void on_token(const GeneratedToken& token) = 0;
  // Exactly once, after the last on_token of every choice (also for cancelled and failed
  // requests).
  virtual void on_finish(const RequestOutcome& outcome) = 0;
};

class Engine {
 public:
  // Allocates the runner's KV cache (options.num_kv_blocks x block_size).
  Engine(ModelRunner& runner, EngineOptions options);
  ~Engine();  // stop()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void start();
  // Stops the loop; requests still in flight finish as kCancelled.
  void stop();

  enum class Admission { kAccepted, kQueueFull, kStopped };
  // Reserves the ids of a request of `choices` choices and returns the first (the request's id).
  uint64_t new_request_id(int choices = 1) { return next_id_.fetch_add(uint64_t(choices)); }
  // Queues a request under an id from new_request_id(request.n). The request must be valid (see
  // EngineRequest; prompt + max_tokens <= max_model_len): an invalid one throws
  // std::invalid_argument, as the server checks first. On kQueueFull / kStopped the sink is not
  // called.
  Admission submit(uint64_t id, EngineRequest request, std::shared_ptr<RequestSink> sink);
  // Cancels a request (by its id: every choice) wherever it is (waiting, running, not yet picked
  // up); its blocks are freed and its sink gets on_finish(kCancelled). Unknown or finished ids
  // are ignored.
  void cancel(uint64_t id);
  // Finishes one choice (id + choice) as kStop before its next step (the server found a stop
  // string in its text): its blocks are freed; the sink gets on_finish once every choice has
  // finished. A sink may call it from on_token. Unknown or finished ids are ignored.
  void stop_request(uint64_t choice_id);

  const ModelConfig& model_config() const { return runner_.config(); }
  const EngineOptions& options() const { return options_; }
  const EngineMetrics& metrics() const { return metrics_; }

 private:
  struct Pending {
    uint64_t id;
    EngineRequest request;
    std::shared_ptr<RequestSink> sink;
    int64_t arrival_ns;
  };
  // One choice: a sequence, by its id (request id + choice).
  struct Active {
    std::unique_ptr<Sequence> sequence;
    std::shared_ptr<RequestSink> sink;
    int64_t arrival_ns = 0;
    int64_t last_token_ns = 0;  // 0 until the first token
    int logprobs = -1;          // EngineRequest::logprobs
    uint64_t request_id = 0;
    int choice = 0;
  };
  // A request until its last choice finishes.
  struct Request {
    int choices = 1;
    int open = 1;  // choices not finished yet
    RequestOutcome outcome;
  };

  // A submitted step not yet collected: which requests it served, for delivery and failures.
  struct InFlightStep {
    std::vector<uint64_t> ids;      // every choice in the step
    std::vector<uint64_t> sampled;  // the choice of each sample row, in row order
    bool wants_logprobs = false;    // a sampled row asked for logprobs
  };

  void loop();
  void admit(Pending& pending);
  // Schedules and submits the next step; false when there was nothing to submit.
  bool submit_step();
  // Collects the oldest in-flight step and delivers its tokens.
  void collect_step();
  // Takes the oldest outstanding step out of the ring (the caller collects it from the runner).
  InFlightStep& pop_oldest_step();
  // Fails the requests of the given choices, every choice of each.
  void fail_requests(const std::vector<uint64_t>& choice_ids, const std::string& error);
  // Finishes one choice; the request's sink hears on_finish when it was the last.
  void finish(uint64_t choice_id, FinishReason reason, std::string error = {});
  // Finishes every open choice of request `request_id`.
  void finish_request(uint64_t request_id, FinishReason reason, const std::string& error = {});
  void publish_gauges();

  ModelRunner& runner_;
  EngineOptions options_;
  KvBlockAllocator allocator_;
  Scheduler scheduler_;
  EngineMetrics metrics_;

  // A request to end early: cancel() (kCancelled) or stop_request() (kStop).
  struct EarlyFinish {
    uint64_t id;
    FinishReason reason;
  };
  void finish_early(uint64_t id, FinishReason reason);

  std::mutex mutex_;  // guards incoming_, early_finishes_, stopping_
  std::condition_variable wake_;
  std::vector<Pending> incoming_;
  std::vector<EarlyFinish> early_finishes_;
  bool stopping_ = false;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<int64_t> scheduler_waiting_{0};  // published by the loop for submit()'s queue cap
  std::thread thread_;

  // Loop-thread state, reused every step.
  std::unordered_map<uint64_t, Active> active_;     // by choice id
  std::unordered_map<uint64_t, Request> requests_;  // by request id
  std::vector<Pending> incoming_local_;
  std::vector<EarlyFinish> early_finishes_local_;
  StepBatch batch_;
  StepResult result_;
  int64_t steps_submitted_ = 0;
  // Ring of the outstanding steps (at most two, runner.h): step s is in_flight_[s % 2].
  InFlightStep in_flight_[2];
  int in_flight_count_ = 0;
};

}  // namespace gpufrac::engine
