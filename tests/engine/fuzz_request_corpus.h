// Generators of malformed /v1/completions bodies for the fuzz tests: valid requests mutated at
// the byte level (flips, cuts, splices, hostile tokens such as huge numbers, deep nesting, NUL
// and invalid UTF-8), and well-formed JSON whose known fields hold values of random types.
// Deterministic for a given std::mt19937.
#pragma once

#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace gpufrac::testing {

inline std::string random_json_value(std::mt19937& rng, int depth = 0) {
  switch (rng() % (depth > 2 ? 8 : 10)) {
    case 0: return "null";
    case 1: return rng() % 2 ? "true" : "false";
    case 2: return std::to_string(int64_t(rng() % 400) - 100);
    case 3: return std::to_string(double(rng() % 1000) / 7.0);
    case 4: return "\"" + std::string(rng() % 5, char('a' + rng() % 26)) + "\"";
    case 5: return "99999999999999999999";
    case 6: return "-9223372036854775809";
    case 7: return "1e999";
    case 8: {
      std::string a = "[";
      for (int i = 0, n = int(rng() % 5); i < n; ++i) {
        a += (i ? "," : "") + random_json_value(rng, depth + 1);
      }
      return a + "]";
    }
    default: {
      std::string o = "{";
      for (int i = 0, n = int(rng() % 3); i < n; ++i) {
        o += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + random_json_value(rng, depth + 1);
      }
      return o + "}";
    }
  }
}

inline std::string valid_body(std::mt19937& rng, int vocab_size) {
  std::string prompt = "[";
  for (int i = 0, n = 1 + int(rng() % 12); i < n; ++i) {
    prompt += (i ? "," : "") + std::to_string(rng() % vocab_size);
  }
  prompt += "]";
  std::string body = "{\"model\":\"fuzz\",\"prompt\":" + prompt +
                     ",\"max_tokens\":" + std::to_string(1 + rng() % 8);
  if (rng() % 2) body += ",\"stream\":true,\"stream_options\":{\"include_usage\":true}";
  if (rng() % 2) body += ",\"temperature\":0.7,\"top_p\":0.9,\"top_k\":20,\"seed\":3";
  if (rng() % 2) body += ",\"min_tokens\":1,\"stop_token_ids\":[3,4],\"ignore_eos\":false";
  return body + "}";
}

// Well-formed JSON, known fields, values of random types.
inline std::string typed_body(std::mt19937& rng) {
  static const char* kFields[] = {"model",      "prompt",         "max_tokens",   "min_tokens",
                                  "temperature", "top_p",          "top_k",        "seed",
                                  "ignore_eos", "stop_token_ids", "stream",       "stream_options",
                                  "n",          "echo",           "logprobs",     "stop",
                                  "logit_bias", "best_of",        "presence_penalty"};
  std::string body = "{";
  for (int i = 0, n = 1 + int(rng() % 6); i < n; ++i) {
    body += std::string(i ? "," : "") + "\"" + kFields[rng() % std::size(kFields)] +
            "\":" + random_json_value(rng);
  }
  return body + "}";
}

inline std::string mutate(std::string s, std::mt19937& rng) {
  static const std::vector<std::string> kHostile = {
      "\"", "{", "}", "[", "]", ",", ":", "null", "-", "1e999", "99999999999999999999",
      std::string(1, '\0'), "\xff\xfe", "\\u0000", "\\ud800", std::string(2000, '['), "NaN"};
  for (int edits = 1 + int(rng() % 4); edits > 0 && !s.empty(); --edits) {
    size_t at = rng() % s.size();
    switch (rng() % 5) {
      case 0: s[at] = char(rng() % 256); break;
      case 1: s.erase(at, 1 + rng() % 8); break;
      case 2: s.insert(at, kHostile[rng() % kHostile.size()]); break;
      case 3: s.insert(at, s.substr(rng() % s.size(), 1 + rng() % 16)); break;
      default: s.resize(at); break;
    }
  }
  return s;
}

// One malformed (or, rarely, accidentally valid) body.
inline std::string fuzz_body(std::mt19937& rng, int vocab_size) {
  switch (rng() % 3) {
    case 0: return typed_body(rng);
    default: return mutate(valid_body(rng, vocab_size), rng);
  }
}

}  // namespace gpufrac::testing
