#include "engine/tokenizer/stop_matcher.h"

#include <algorithm>

namespace gpufrac::engine {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings) {
  for (size_t i = 0; i < stop_strings.size(); ++i) {
    if (stop_strings[i].empty()) continue;
    stops_.push_back(std::move(stop_strings[i]));
    stop_indices_.push_back(i);
  }
}

StopStringMatcher::Result StopStringMatcher::feed(std::string_view delta) {
  Result result;
  if (stopped_) {
    result.stopped = true;
    return result;
  }
  held_.append(delta);
  // The stop that ends first; none can lie wholly inside what was held before this delta.
  size_t best_end = std::string::npos, best_start = 0, best = 0;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t start = held_.find(stops_[i]);
    if (start == std::string::npos) continue;
    const size_t end = start + stops_[i].size();
    if (end < best_end || (end == best_end && start < best_start)) {
      best_end = end;
      best_start = start;
      best = i;
    }
  }
  if (best_end != std::string::npos) {
    result.text = held_.substr(0, best_start);
    result.stopped = true;
    result.stop_index = stop_indices_[best];
    stopped_ = true;
    held_.clear();
    return result;
  }
  // Hold the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  const std::string_view held = held_;
  for (const std::string& stop : stops_) {
    for (size_t k = std::min(stop.size() - 1, held.size()); k > hold; --k) {
      if (held.substr(held.size() - k) == std::string_view(stop).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  result.text = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return result;
}

std::string StopStringMatcher::finish() {
  std::string rest = std::move(held_);
  held_.clear();
  return rest;
}

}  // namespace gpufrac::engine
