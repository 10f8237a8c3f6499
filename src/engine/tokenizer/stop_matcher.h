// Stop strings over streamed text (the OpenAI `stop` parameter). Text arrives in deltas of whole
// characters (StreamingDetokenizer output); a stop string may span deltas, so the longest tail
// that could still begin a stop string is held back, the rest is released at once. When a stop
// string completes, the text before it is released and nothing after it ever is; the stop string
// itself is never part of the output.
//
// Semantics: the stop string that completes first in the character stream wins (ties: the one
// that starts first); so the output does not depend on how the text was cut into deltas.
// One matcher per sequence; not thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpufrac::engine {

class StopStringMatcher {
 public:
  struct Result {
    std::string text;       // releasable now
    bool stopped = false;   // a stop string completed; generation should end
    size_t stop_index = 0;  // which one (index into the constructor's list), when stopped
  };

  // Empty strings in `stop_strings` are ignored (they would match everywhere).
  explicit StopStringMatcher(std::vector<std::string> stop_strings);

  // After a stop, returns an empty, stopped result.
  Result feed(std::string_view delta);
  // The end of generation without a stop: the held-back text (empty after a stop).
  std::string finish();

  bool stopped() const { return stopped_; }
  bool empty() const { return stops_.empty(); }

 private:
  std::vector<std::string> stops_;
  std::vector<size_t> stop_indices_;  // position of stops_[i] in the caller's list
  std::string held_;
  bool stopped_ = false;
};

}  // namespace gpufrac::engine
