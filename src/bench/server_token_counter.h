// Counts the tokens of a request's text prompt by asking the server, as vLLM (and gpufrac serve)
// define POST /tokenize: {"model", "messages": [{"role": "user", "content": TEXT}],
// "add_generation_prompt": true} for chat (the chat template and generation prompt included, as
// /v1/chat/completions will apply them), {"model", "prompt": TEXT} for completions (special
// tokens such as BOS included, as /v1/completions adds them). The reply's "count" (else the length
// of its "tokens") is the answer.
//
// Blocking calls through common's HTTP client (one connection each). Thread-safe. Failures throw
// RuntimeFailure with one line: a missing /tokenize (HTTP 404, 405 or 501) names the fix.
#pragma once

#include <atomic>
#include <string>

#include "bench/text_prompts.h"
#include "bench/workload.h"

namespace gpufrac {

class ServerTokenCounter : public TokenCounter {
 public:
  // `base_url` is the target's URL without /v1 ("http://127.0.0.1:8001").
  // `api_key`: sent as "Authorization: Bearer KEY" ("": none).
  ServerTokenCounter(const std::string& base_url, std::string model, Endpoint endpoint,
                     const std::string& api_key = {}, double timeout_s = 60);
  int count(const std::string& text) const override;
  std::string source() const override { return "POST " + url_; }
  int64_t calls() const { return calls_.load(); }

 private:
  std::string url_;
  std::string model_;
  Endpoint endpoint_;
  std::vector<std::string> headers_;
  double timeout_s_;
  mutable std::atomic<int64_t> calls_{0};
};

}  // namespace gpufrac
