#include "engine/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/seeded_random.h"

namespace gpufrac::engine {

namespace {

constexpr float kGreedyBelow = 1e-5f;

struct Candidate {
  float logit;
  int32_t id;
  float weight;  // exp((logit - max) / temperature): the unnormalised probability
};

// More likely first; equal logits: lower id first (a strict total order).
bool more_likely(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Reorders `kept` so that its first n elements are the smallest most-likely set whose weight
// reaches `target`, and returns n. Quickselect on mass: expected O(size), no full sort.
size_t top_p_prefix(std::vector<Candidate>& kept, double target) {
  size_t lo = 0, hi = kept.size();  // [0, lo) kept for sure, [hi, size) dropped for sure
  double remaining = target;        // weight still needed beyond [0, lo)
  while (lo < hi) {
    std::swap(kept[lo + (hi - lo) / 2], kept[hi - 1]);
    Candidate pivot = kept[hi - 1];
    auto mid_it = std::partition(kept.begin() + int64_t(lo), kept.begin() + int64_t(hi - 1),
                                 [&](const Candidate& c) { return more_likely(c, pivot); });
    size_t mid = size_t(mid_it - kept.begin());
    std::swap(kept[mid], kept[hi - 1]);
    double upper = 0;
    for (size_t i = lo; i < mid; ++i) upper += kept[i].weight;
    if (upper >= remaining) {
      hi = mid;
    } else if (upper + pivot.weight >= remaining) {
      return mid + 1;
    } else {
      remaining -= upper + pivot.weight;
      lo = mid + 1;
    }
  }
  return std::max<size_t>(lo, 1);
}

// The logits the sampler sees: `logits` itself, or a copy with the row's adjustments applied
// (valid until the next call on this thread).
std::span<const float> adjusted_logits(std::span<const float> logits,
                                       const SamplingParams& params) {
  const int32_t placeholder = params.resolved_placeholder;
  const bool count_placeholder =
      params.penalties.active() && placeholder >= 0 && size_t(placeholder) < logits.size();
  if (params.adjustments.empty() && !count_placeholder) return logits;
  thread_local std::vector<float> adjusted;
  adjusted.assign(logits.begin(), logits.end());
  bool placeholder_listed = false;
  for (const LogitAdjustment& a : params.adjustments) {
    if (a.id < 0 || size_t(a.id) >= logits.size()) continue;
    int32_t count = a.output_count;
    if (count_placeholder && a.id == placeholder) {
      ++count;
      placeholder_listed = true;
    }
    adjusted[size_t(a.id)] =
        adjust_logit(logits[size_t(a.id)], a.bias, count, a.in_prompt, params.penalties);
  }
  if (count_placeholder && !placeholder_listed) {
    adjusted[size_t(placeholder)] =
        adjust_logit(logits[size_t(placeholder)], 0, 1, false, params.penalties);
  }
  return adjusted;
}

}  // namespace

double sampling_uniform(uint64_t seed, int64_t generated) {
  uint64_t bits = mix64(splitmix64(seed) ^ uint64_t(generated));
  return (double(bits >> 11) + 0.5) * 0x1.0p-53;
}

int32_t sample_token(std::span<const float> raw_logits, const SamplingParams& params) {
  const std::span<const float> logits = adjusted_logits(raw_logits, params);
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
    kept.push_back({logits[id], int32_t(id), 0});
    max_logit = std::max(max_logit, logits[id]);
  }
  if (kept.empty()) return -1;
  float inv_temperature = 1.0f / params.temperature;
  if (params.min_p > 0) {  // keeps the id order
    const float floor = max_logit * inv_temperature + std::log(params.min_p);
    std::erase_if(kept, [&](const Candidate& c) { return c.logit * inv_temperature < floor; });
  }
  bool selected = false;  // kept is no longer in id order
  if (params.top_k > 0 && size_t(params.top_k) < kept.size()) {
    selected = true;
    std::nth_element(kept.begin(), kept.begin() + params.top_k, kept.end(), more_likely);
    kept.resize(params.top_k);
  }
  double total = 0;
  for (Candidate& c : kept) {
    c.weight = std::exp((c.logit - max_logit) * inv_temperature);
    total += c.weight;
  }
  if (params.top_p < 1) {
    selected = true;
    kept.resize(top_p_prefix(kept, std::max(0.0f, params.top_p) * total));
  }
  // Canonical order, so the draw depends on the set of kept ids and not on how it was selected.
  if (selected) {
    std::sort(kept.begin(), kept.end(),
              [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
    total = 0;
    for (const Candidate& c : kept) total += c.weight;
  }
  double target = sampling_uniform(params.seed, params.generated) * total;
  double cumulative = 0;
  for (const Candidate& c : kept) {
    cumulative += c.weight;
    if (cumulative >= target) return c.id;
  }
  return kept.back().id;
}

void token_logprobs(std::span<const float> logits, int32_t sampled, int top,
                    std::span<TokenLogprob> out) {
  float max_logit = -INFINITY;
  thread_local std::vector<int32_t> finite;
  finite.clear();
  for (size_t id = 0; id < logits.size(); ++id) {
    if (!std::isfinite(logits[id])) continue;
    finite.push_back(int32_t(id));
    max_logit = std::max(max_logit, logits[id]);
  }
  double sum = 0;
  for (int32_t id : finite) sum += std::exp(double(logits[size_t(id)]) - double(max_logit));
  const double log_total = double(max_logit) + std::log(sum);
  auto logprob = [&](int32_t id) {
    if (id < 0 || size_t(id) >= logits.size() || !std::isfinite(logits[size_t(id)])) {
      return -INFINITY;
    }
    return float(double(logits[size_t(id)]) - log_total);
  };
  out[0] = {sampled, logprob(sampled)};
  const size_t count = std::min(finite.size(), size_t(std::max(top, 0)));
  auto more_likely_id = [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] ||
           (logits[size_t(a)] == logits[size_t(b)] && a < b);
  };
  std::partial_sort(finite.begin(), finite.begin() + int64_t(count), finite.end(), more_likely_id);
  for (size_t i = 0; i < size_t(std::max(top, 0)); ++i) {
    out[1 + i] = i < count ? TokenLogprob{finite[i], logprob(finite[i])} : TokenLogprob{};
  }
}

}  // namespace gpufrac::engine
