// The requests bench sends: OpenAI streaming requests of a chosen input and output length.
//
// Prompts are token ids or text. Token ids go to /v1/completions as an array, so the input
// length is exact: ids drawn uniformly from [0, vocab_size) by a seeded generator, distinct per
// request (the first block of ids of every request differs from every other's, so no prefix
// cache can serve one request from another). Text goes to /v1/completions as the prompt string
// or to /v1/chat/completions as one user message; its texts are built beforehand, exact to the
// token as the server counts them (text_prompts.h), and handed to the generator with
// set_texts(). Every request asks max_tokens = min_tokens = OSL, ignore_eos, stream, and
// stream_options.include_usage.
//
// Lengths are fixed, or drawn per request from a normal distribution (mean, stddev), rounded and
// kept >= 1. Everything is a function of (seed, stream key, request index): the same run asks the
// same things, and different stream keys (target, run point) ask different ones. A generator is
// not thread-safe; use one per target.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/seeded_random.h"  // mix_seed: the seeds of independent random streams

namespace gpufrac {

enum class Endpoint { kCompletions, kChat };
const char* endpoint_name(Endpoint endpoint);  // "completions" | "chat"
const char* endpoint_path(Endpoint endpoint);  // "/v1/completions" | "/v1/chat/completions"

enum class PromptKind { kTokenIds, kText };
const char* prompt_kind_name(PromptKind kind);  // "ids" | "text"

struct WorkloadSpec {
  Endpoint endpoint = Endpoint::kCompletions;
  PromptKind prompt = PromptKind::kTokenIds;  // chat takes kText only
  int isl = 2048;
  int osl = 256;
  double isl_stddev = 0;
  double osl_stddev = 0;
  int vocab_size = 151643;  // Qwen3's ordinary (non-special) tokens
  uint64_t seed = 0;
};

struct PreparedRequest {
  std::string body;       // JSON
  int input_tokens = 0;   // the input length asked for (exact: ids, or a text built to it)
  int output_tokens = 0;  // the OSL asked for (max_tokens = min_tokens)
};

class WorkloadGenerator {
 public:
  // `stream_key` separates request streams of one seed (bench uses target and run point).
  WorkloadGenerator(WorkloadSpec spec, std::string model, uint64_t stream_key);

  // Request `index`'s input length, and the seed its text is drawn from (text prompts).
  int input_length(int64_t index) const;
  uint64_t text_seed(int64_t index) const;
  // Text prompts: texts[i] is request i's prompt, built to input_length(i) tokens. make(i)
  // needs i < texts.size().
  void set_texts(std::vector<std::string> texts);

  PreparedRequest make(int64_t index);

 private:
  uint64_t request_seed(int64_t index) const;
  int draw_length(uint64_t rng_seed, int mean, double stddev) const;
  void append_token_ids(uint64_t request_seed, int length, std::string& body);

  WorkloadSpec spec_;
  std::string model_json_;  // the model name, JSON-quoted
  uint64_t stream_seed_;
  std::unordered_set<uint64_t> prompt_heads_;  // hashes of every id prompt's first block
  std::vector<std::string> texts_;
};

}  // namespace gpufrac
