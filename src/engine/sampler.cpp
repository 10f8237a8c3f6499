#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace gpufrac::engine {

namespace {

uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

constexpr float kGreedyBelow = 1e-5f;

struct Candidate {
  float logit;
  int32_t id;
};

// More likely first; equal logits: lower id first.
bool more_likely(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Keeps the smallest most-likely prefix of `kept` whose probability mass reaches top_p.
// Sorts only as much as needed: the top 256, then 4x more, until the mass is reached.
void apply_top_p(std::vector<Candidate>& kept, double max_logit, double inv_temperature,
                 double total, double top_p) {
  size_t sorted = 0;
  double mass = 0;
  size_t keep = kept.size();
  for (size_t window = 256;; window *= 4) {
    size_t end = std::min(window, kept.size());
    std::partial_sort(kept.begin() + sorted, kept.begin() + end, kept.end(), more_likely);
    bool reached = false;
    for (; sorted < end; ++sorted) {
      mass += std::exp((kept[sorted].logit - max_logit) * inv_temperature) / total;
      if (mass >= top_p) {
        keep = sorted + 1;
        reached = true;
        break;
      }
    }
    if (reached || end == kept.size()) break;
  }
  kept.resize(keep);
}

}  // namespace

double sampling_uniform(uint64_t seed, int64_t generated) {
  uint64_t bits = mix64(mix64(seed + 0x9e3779b97f4a7c15ull) ^ uint64_t(generated));
  return (double(bits >> 11) + 0.5) * 0x1.0p-53;
}

int32_t sample_token(std::span<const float> logits, const SamplingParams& params) {
  thread_local std::vector<uint8_t> suppressed;
  suppressed.assign(logits.size(), 0);
  for (int32_t id : params.suppressed_ids) {
    if (id >= 0 && size_t(id) < logits.size()) suppressed[id] = 1;
  }
  auto allowed = [&](size_t id) { return !suppressed[id] && std::isfinite(logits[id]); };

  if (params.temperature < kGreedyBelow) {
    int32_t best = -1;
    for (size_t id = 0; id < logits.size(); ++id) {
      if (allowed(id) && (best < 0 || logits[id] > logits[best])) best = int32_t(id);
    }
    return best;
  }

  thread_local std::vector<Candidate> kept;
  kept.clear();
  float max_logit = -INFINITY;
  for (size_t id = 0; id < logits.size(); ++id) {
    if (!allowed(id)) continue;
    kept.push_back({logits[id], int32_t(id)});
    max_logit = std::max(max_logit, logits[id]);
  }
  if (kept.empty()) return -1;
  bool selected = false;  // kept is no longer in id order
  if (params.top_k > 0 && size_t(params.top_k) < kept.size()) {
    selected = true;
    std::nth_element(kept.begin(), kept.begin() + params.top_k, kept.end(), more_likely);
    kept.resize(params.top_k);
  }
  double inv_temperature = 1.0 / params.temperature;
  auto weight = [&](const Candidate& c) { return std::exp((c.logit - max_logit) * inv_temperature); };
  if (params.top_p < 1) {
    selected = true;
    double total = 0;
    for (const Candidate& c : kept) total += weight(c);
    apply_top_p(kept, max_logit, inv_temperature, total, std::max(0.0f, params.top_p));
  }
  // Canonical order, so the draw depends on the set of kept ids and not on how it was selected.
  if (selected) {
    std::sort(kept.begin(), kept.end(),
              [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  }
  double total = 0;
  for (const Candidate& c : kept) total += weight(c);
  double target = sampling_uniform(params.seed, params.generated) * total;
  double cumulative = 0;
  for (const Candidate& c : kept) {
    cumulative += weight(c);
    if (cumulative >= target) return c.id;
  }
  return kept.back().id;
}

}  // namespace gpufrac::engine
