#include "bench/workload.h"

#include <charconv>
#include <cmath>
#include <random>
#include <stdexcept>

#include "common/json.h"
#include "common/seeded_random.h"

namespace gpufrac {
namespace {

// The prefix caches of vLLM and of our engine share KV in blocks of 16 tokens: prompts whose
// first 16 ids differ share nothing.
constexpr size_t kDistinctHead = 16;
constexpr int kMaxRedraws = 64;
// Salts of a request's random streams: 1 input length, 2 output length, 3.. id draws, and text.
constexpr uint64_t kTextSalt = 0x7e47;

uint64_t hash_head(const std::vector<uint32_t>& ids) {
  uint64_t h = 0x1234567;
  for (size_t i = 0; i < ids.size() && i < kDistinctHead; ++i) h = mix_seed(h, ids[i]);
  return h;
}

std::string common_fields(const std::string& model_json, int osl) {
  std::string s = "\"model\":" + model_json;
  std::string n = std::to_string(osl);
  s += ",\"max_tokens\":" + n + ",\"min_tokens\":" + n;
  s += ",\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true}";
  return s;
}

}  // namespace

const char* endpoint_name(Endpoint endpoint) {
  return endpoint == Endpoint::kChat ? "chat" : "completions";
}

const char* endpoint_path(Endpoint endpoint) {
  return endpoint == Endpoint::kChat ? "/v1/chat/completions" : "/v1/completions";
}

const char* prompt_kind_name(PromptKind kind) {
  return kind == PromptKind::kText ? "text" : "ids";
}

WorkloadGenerator::WorkloadGenerator(WorkloadSpec spec, std::string model, uint64_t stream_key)
    : spec_(spec), model_json_(Json(model).dump()), stream_seed_(mix_seed(spec.seed, stream_key)) {}

uint64_t WorkloadGenerator::request_seed(int64_t index) const {
  return mix_seed(stream_seed_, uint64_t(index));
}

int WorkloadGenerator::draw_length(uint64_t rng_seed, int mean, double stddev) const {
  if (stddev <= 0) return mean;
  std::mt19937_64 rng(rng_seed);
  std::normal_distribution<double> normal(mean, stddev);
  return std::max(1, int(std::lround(normal(rng))));
}

int WorkloadGenerator::input_length(int64_t index) const {
  return draw_length(mix_seed(request_seed(index), 1), spec_.isl, spec_.isl_stddev);
}

uint64_t WorkloadGenerator::text_seed(int64_t index) const {
  return mix_seed(request_seed(index), kTextSalt);
}

void WorkloadGenerator::set_texts(std::vector<std::string> texts) {
  texts_ = std::move(texts);
}

void WorkloadGenerator::append_token_ids(uint64_t seed, int length, std::string& body) {
  std::vector<uint32_t> ids(static_cast<size_t>(length));
  for (int attempt = 0;; ++attempt) {
    std::mt19937_64 rng(mix_seed(seed, 3 + uint64_t(attempt)));
    std::uniform_int_distribution<uint32_t> pick(0, uint32_t(spec_.vocab_size) - 1);
    for (uint32_t& id : ids) id = pick(rng);
    // Redraw on a repeated head; give up after a few tries when the space is too small to avoid
    // it (a 1-token prompt from a 100-token vocabulary cannot stay distinct for long).
    if (prompt_heads_.insert(hash_head(ids)).second || attempt == kMaxRedraws) break;
  }
  body.reserve(body.size() + ids.size() * 8 + 16);
  body += ",\"prompt\":[";
  char number[16];
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) body += ',';
    auto [end, ec] = std::to_chars(number, number + sizeof number, ids[i]);
    body.append(number, end);
  }
  body += "]}";
}

PreparedRequest WorkloadGenerator::make(int64_t index) {
  uint64_t seed = request_seed(index);
  PreparedRequest request;
  request.input_tokens = input_length(index);
  request.output_tokens = draw_length(mix_seed(seed, 2), spec_.osl, spec_.osl_stddev);
  std::string& body = request.body;
  body = "{" + common_fields(model_json_, request.output_tokens);
  if (spec_.prompt == PromptKind::kTokenIds) {
    append_token_ids(seed, request.input_tokens, body);
    return request;
  }
  if (index < 0 || size_t(index) >= texts_.size()) {
    throw std::logic_error("text prompt " + std::to_string(index) + " was not prepared");
  }
  std::string text = Json(texts_[size_t(index)]).dump();
  if (spec_.endpoint == Endpoint::kChat) {
    body += ",\"messages\":[{\"role\":\"user\",\"content\":" + text + "}]}";
  } else {
    body += ",\"prompt\":" + text + "}";
  }
  return request;
}

}  // namespace gpufrac
