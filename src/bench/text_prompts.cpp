#include "bench/text_prompts.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <random>
#include <thread>

#include "common/error.h"

namespace gpufrac {
namespace {

// Common English words: one token each (after a space) in the BPE vocabularies bench meets.
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
constexpr uint32_t kWordCount = sizeof(kWords) / sizeof(kWords[0]);

// Candidates for the filler piece, tried in order at calibration.
constexpr const char* kFillers[] = {" the", " a", " of", " and", " to", " is", ".", "!"};
constexpr int kCalibrationPieces = 8;
constexpr int kMaxProbes = 64;    // word-count probes per prompt (bisection halves every other)
constexpr int kMaxFillTries = 4;  // filled texts checked per prompt

const std::string kFixHint =
    " (token-id prompts need no tokenizer: --endpoint completions --prompt ids)";

// The seeded words of one prompt, drawn as far as a probe needs them.
class WordStream {
 public:
  explicit WordStream(uint64_t seed) : rng_(seed) {}
  std::string first(size_t count) {
    std::uniform_int_distribution<uint32_t> pick(0, kWordCount - 1);
    while (words_.size() < count) words_.push_back(pick(rng_));
    std::string text;
    text.reserve(count * 8);
    for (size_t i = 0; i < count; ++i) {
      if (i) text += ' ';
      text += kWords[words_[i]];
    }
    return text;
  }

 private:
  std::mt19937_64 rng_;
  std::vector<uint32_t> words_;
};

std::string without_leading_spaces(const std::string& text) {
  return text.substr(std::min(text.size(), text.find_first_not_of(' ')));
}

}  // namespace

ExactTextBuilder::ExactTextBuilder(const TokenCounter& counter) : counter_(counter) {
  const std::string probe = kWords[0];
  const int one_word = counter_.count(probe);
  overhead_ = std::max(0, one_word - 1);
  std::string tried;
  for (const char* candidate : kFillers) {
    std::string text = probe;
    for (int i = 0; i < kCalibrationPieces; ++i) text += candidate;
    if (counter_.count(text) - one_word == kCalibrationPieces) {
      filler_ = candidate;
      break;
    }
    tried += std::string(tried.empty() ? "'" : ", '") + candidate + "'";
  }
  if (filler_.empty()) {
    throw RuntimeFailure(counter_.source() + " counts none of " + tried +
                         " as one token when appended to a text, so bench cannot build text "
                         "prompts of an exact length for this model" +
                         kFixHint);
  }
  shortest_ = counter_.count(without_leading_spaces(filler_));
}

std::string ExactTextBuilder::fill(const std::string& base, int pieces) const {
  std::string text = base;
  text.reserve(base.size() + size_t(pieces) * filler_.size());
  for (int i = 0; i < pieces; ++i) text += filler_;
  return base.empty() ? without_leading_spaces(text) : text;
}

std::string ExactTextBuilder::build(int tokens, uint64_t seed) const {
  if (tokens < shortest_) {
    throw RuntimeFailure("a text prompt of " + std::to_string(tokens) + " tokens is shorter than " +
                         "the shortest one " + counter_.source() + " allows (" +
                         std::to_string(shortest_) +
                         " tokens: the request's own, e.g. its chat template, plus one): raise "
                         "--isl or lower --isl-stddev" +
                         kFixHint);
  }
  WordStream words(seed);
  // The longest word count known to stay within `tokens` (lo) and the shortest known to exceed
  // it (hi); 0 words count as the filler-only text's base.
  size_t lo = 0, hi = SIZE_MAX;
  int lo_tokens = shortest_ - 1;
  size_t k = size_t(std::max(1, tokens - overhead_));
  int closest = 0;
  for (int probe = 0; probe < kMaxProbes && hi != lo + 1; ++probe) {
    std::string text = words.first(k);
    int counted = counter_.count(text);
    if (counted == tokens) return text;
    if (std::abs(counted - tokens) < std::abs(closest - tokens)) closest = counted;
    if (counted < tokens) {
      lo = k;
      lo_tokens = counted;
    } else {
      hi = k;
    }
    if (hi == lo + 1) break;
    // Secant step from the measured tokens per word; every other step bisects a known bracket,
    // so a tokenizer far from one token per word still converges in O(log tokens) probes.
    double per_word = std::clamp(double(counted - overhead_) / double(k), 0.25, 16.0);
    double step = double(tokens - counted) / per_word;
    double guess =
        double(k) + (step > 0 ? std::max(1.0, std::round(step)) : std::min(-1.0, std::round(step)));
    if (hi != SIZE_MAX && probe % 2 == 1) guess = double(lo + (hi - lo) / 2);
    guess = std::clamp(guess, double(lo + 1), hi == SIZE_MAX ? 1e12 : double(hi - 1));
    k = size_t(guess);
  }
  if (hi != lo + 1) {
    throw RuntimeFailure(counter_.source() + ": no run of words counts " + std::to_string(tokens) +
                         " tokens after " + std::to_string(kMaxProbes) + " tries (closest " +
                         std::to_string(closest) + ")" + kFixHint);
  }
  // lo words stay below `tokens` and one more word overshoots: top up with filler pieces.
  const std::string base = lo ? words.first(lo) : std::string();
  int pieces = tokens - lo_tokens;
  for (int attempt = 0; attempt < kMaxFillTries && pieces >= 1; ++attempt) {
    std::string text = fill(base, pieces);
    int counted = counter_.count(text);
    if (counted == tokens) return text;
    if (std::abs(counted - tokens) < std::abs(closest - tokens)) closest = counted;
    pieces += tokens - counted;
  }
  throw RuntimeFailure(counter_.source() + ": could not top up a text to exactly " +
                       std::to_string(tokens) + " tokens with '" + filler_ + "' pieces (closest " +
                       std::to_string(closest) + ")" + kFixHint);
}

std::vector<std::string> build_exact_texts(
    const TokenCounter& counter, const std::vector<TextPromptSpec>& specs, int parallel,
    const std::function<void(int64_t done, int64_t total)>& on_progress,
    double progress_interval_s) {
  ExactTextBuilder builder(counter);
  const int64_t total = int64_t(specs.size());
  std::vector<std::string> texts(specs.size());
  std::atomic<int64_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex mutex;
  std::condition_variable changed;
  int64_t done = 0;  // guarded by mutex
  std::exception_ptr failure;

  auto work = [&] {
    for (int64_t i; !stop.load() && (i = next.fetch_add(1)) < total;) {
      std::exception_ptr error;
      try {
        texts[size_t(i)] = builder.build(specs[size_t(i)].tokens, specs[size_t(i)].seed);
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard lock(mutex);
      if (error && !failure) failure = error;
      if (error) stop = true;
      ++done;
      changed.notify_all();
    }
  };
  std::vector<std::thread> workers;
  const int64_t threads = std::clamp<int64_t>(parallel, 1, std::max<int64_t>(1, total));
  for (int64_t t = 0; t < threads; ++t) workers.emplace_back(work);
  auto join = [&] {
    stop = true;
    for (std::thread& w : workers) w.join();
  };

  const auto interval = std::chrono::duration<double>(progress_interval_s);
  std::unique_lock lock(mutex);
  while (done < total && !failure) {
    changed.wait_for(lock, interval, [&] { return done >= total || bool(failure); });
    if (!on_progress || done >= total || failure) continue;
    int64_t so_far = done;
    lock.unlock();
    try {
      on_progress(so_far, total);
    } catch (...) {
      join();
      throw;
    }
    lock.lock();
  }
  lock.unlock();
  join();
  if (failure) std::rethrow_exception(failure);
  if (on_progress) on_progress(total, total);
  return texts;
}

}  // namespace gpufrac
