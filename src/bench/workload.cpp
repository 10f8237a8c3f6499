#include "bench/workload.h"

#include <charconv>
#include <cmath>
#include <random>
#include <vector>

#include "common/json.h"

namespace gpufrac {
namespace {

// The prefix caches of vLLM and of our engine share KV in blocks of 16 tokens: prompts whose
// first 16 ids differ share nothing.
constexpr size_t kDistinctHead = 16;
constexpr int kMaxRedraws = 64;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// About one token each in every BPE vocabulary bench is likely to meet (a leading space + word).
constexpr const char* kWords[] = {
    "time",     "year",    "people",      "way",      "day",        "man",    "thing",   "woman",
    "life",     "child",   "world",       "school",   "state",      "family", "student", "group",
    "country",  "problem", "hand",        "part",     "place",      "case",   "week",    "company",
    "system",   "program", "question",    "work",     "government", "number", "night",   "point",
    "home",     "water",   "room",        "mother",   "area",       "money",  "story",   "fact",
    "month",    "lot",     "right",       "study",    "book",       "eye",    "job",     "word",
    "business", "issue",   "side",        "kind",     "head",       "house",  "service", "friend",
    "father",   "power",   "hour",        "game",     "line",       "end",    "member",  "law",
    "car",      "city",    "community",   "name",     "president",  "team",   "minute",  "idea",
    "kid",      "body",    "information", "back",     "parent",     "face",   "others",  "level",
    "office",   "door",    "health",      "person",   "art",        "war",    "history", "party",
    "result",   "change",  "morning",     "reason",   "research",   "girl",   "guy",     "moment",
    "air",      "teacher", "force",       "education"};
constexpr size_t kWordCount = sizeof(kWords) / sizeof(kWords[0]);

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

uint64_t mix_seed(uint64_t a, uint64_t b) {
  return splitmix64(a ^ splitmix64(b));
}

const char* endpoint_name(Endpoint endpoint) {
  return endpoint == Endpoint::kChat ? "chat" : "completions";
}

const char* endpoint_path(Endpoint endpoint) {
  return endpoint == Endpoint::kChat ? "/v1/chat/completions" : "/v1/completions";
}

WorkloadGenerator::WorkloadGenerator(WorkloadSpec spec, std::string model, uint64_t stream_key)
    : spec_(spec), model_json_(Json(model).dump()), stream_seed_(mix_seed(spec.seed, stream_key)) {}

int WorkloadGenerator::draw_length(uint64_t rng_seed, int mean, double stddev) const {
  if (stddev <= 0) return mean;
  std::mt19937_64 rng(rng_seed);
  std::normal_distribution<double> normal(mean, stddev);
  return std::max(1, int(std::lround(normal(rng))));
}

PreparedRequest WorkloadGenerator::make(int64_t index) {
  uint64_t request_seed = mix_seed(stream_seed_, uint64_t(index));
  PreparedRequest request;
  request.input_tokens = draw_length(mix_seed(request_seed, 1), spec_.isl, spec_.isl_stddev);
  request.output_tokens = draw_length(mix_seed(request_seed, 2), spec_.osl, spec_.osl_stddev);

  const uint32_t range =
      spec_.endpoint == Endpoint::kChat ? uint32_t(kWordCount) : uint32_t(spec_.vocab_size);
  std::vector<uint32_t> ids(size_t(request.input_tokens));
  for (int attempt = 0;; ++attempt) {
    std::mt19937_64 rng(mix_seed(request_seed, 3 + uint64_t(attempt)));
    std::uniform_int_distribution<uint32_t> pick(0, range - 1);
    for (uint32_t& id : ids) id = pick(rng);
    // Redraw on a repeated head; give up after a few tries when the space is too small to avoid
    // it (a 1-token prompt from a 100-token vocabulary cannot stay distinct for long).
    if (prompt_heads_.insert(hash_head(ids)).second || attempt == kMaxRedraws) break;
  }

  std::string& body = request.body;
  body.reserve(ids.size() * 8 + 256);
  body = "{" + common_fields(model_json_, request.output_tokens);
  if (spec_.endpoint == Endpoint::kChat) {
    std::string text;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) text += ' ';
      text += kWords[ids[i]];
    }
    body += ",\"messages\":[{\"role\":\"user\",\"content\":" + Json(text).dump() + "}]}";
  } else {
    body += ",\"prompt\":[";
    char number[16];
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) body += ',';
      auto [end, ec] = std::to_chars(number, number + sizeof number, ids[i]);
      body.append(number, end);
    }
    body += "]}";
  }
  return request;
}

}  // namespace gpufrac
