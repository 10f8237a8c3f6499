// CollectingSink: a RequestSink for engine tests. Keeps every token delivered (with its choice and
// logprobs) and the outcome, counts finishes, and lets a test wait for the finish. An optional hook
// runs after each token is recorded, outside the sink's lock, with the number of tokens so far (the
// stop tests call Engine::stop_request from it, as the server does when a stop string matches).
// Thread-safe: the engine thread delivers while the test thread reads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace gpufrac::engine::testing {

class CollectingSink : public RequestSink {
 public:
  using TokenHook = std::function<void(int tokens_so_far)>;
  CollectingSink() = default;
  explicit CollectingSink(TokenHook after_token) : after_token_(std::move(after_token)) {}

  void on_token(const GeneratedToken& token) override {
    int count = 0;
    {
      std::lock_guard lock(mutex_);
      tokens_.push_back(token.id);
      choices_.push_back(token.choice);
      logprobs_.emplace_back(token.logprobs.begin(), token.logprobs.end());
      count = int(tokens_.size());
    }
    if (after_token_) after_token_(count);
  }
  void on_finish(const RequestOutcome& outcome) override {
    std::lock_guard lock(mutex_);
    outcome_ = outcome;
    ++finishes_;
    done_.notify_all();
  }
  bool wait(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    std::unique_lock lock(mutex_);
    return done_.wait_for(lock, timeout, [&] { return finishes_ > 0; });
  }
  std::vector<int32_t> tokens() {
    std::lock_guard lock(mutex_);
    return tokens_;
  }
  // Per token, its choice index.
  std::vector<int> choices() {
    std::lock_guard lock(mutex_);
    return choices_;
  }
  // The tokens of one choice, in order.
  std::vector<int32_t> tokens_of(int choice) {
    std::lock_guard lock(mutex_);
    std::vector<int32_t> out;
    for (size_t i = 0; i < tokens_.size(); ++i) {
      if (choices_[i] == choice) out.push_back(tokens_[i]);
    }
    return out;
  }
  // Per token, the logprobs delivered with it (empty when the request asked for none).
  std::vector<std::vector<TokenLogprob>> logprobs() {
    std::lock_guard lock(mutex_);
    return logprobs_;
  }
  RequestOutcome outcome() {
    std::lock_guard lock(mutex_);
    return outcome_;
  }
  int finishes() {
    std::lock_guard lock(mutex_);
    return finishes_;
  }

 private:
  TokenHook after_token_;
  std::mutex mutex_;
  std::condition_variable done_;
  std::vector<int32_t> tokens_;
  std::vector<int> choices_;
  std::vector<std::vector<TokenLogprob>> logprobs_;
  RequestOutcome outcome_;
  int finishes_ = 0;
};

}  // namespace gpufrac::engine::testing
