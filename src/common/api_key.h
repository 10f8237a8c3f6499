// API keys: the one Bearer-token check of `gpufrac serve` (--api-key) and of the node's router
// (models[].api_keys), and the key lists both read.
//
//   bearer_token("Bearer k1") == "k1"   the scheme in any case, spaces around the token dropped;
//                                       any other header (or none): ""
//   keys_equal(presented, key)          constant time: every byte of `key` is compared whatever
//                                       `presented` holds, so the time says nothing about how
//                                       close a guess came (only the key's length is visible)
//   ApiKeyTable                         keys, each with the owners it opens (the router: model
//                                       indexes; serve: 0); find() compares every key, to the end
//   parse_api_keys(text, source)        keys separated by commas or whitespace; lines starting
//                                       with '#' are comments (key files)
//
// A key is 1..512 printable ASCII characters without spaces or commas (what an Authorization
// header carries). Errors name the source and the key's position, never the key: keys are never
// logged, printed or echoed in an HTTP answer.
//
// Pure functions and immutable tables: thread-safe once built.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/http_server.h"

namespace gpufrac {

std::string_view bearer_token(std::string_view authorization);
bool keys_equal(std::string_view presented, std::string_view key);

class ApiKeyTable {
 public:
  // Adds `key` for `owner`; a key added for several owners opens all of them.
  void add(const std::string& key, size_t owner = 0);
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  // The owners of the key equal to `presented`; null when none is.
  const std::vector<size_t>* find(std::string_view presented) const;

 private:
  struct Entry {
    std::string key;
    std::vector<size_t> owners;
  };
  std::vector<Entry> entries_;
};

// What is wrong with a key that is not 1..512 printable ASCII characters without spaces or
// commas, and the fix, without quoting it; "" for a good key.
std::string api_key_problem(std::string_view key);
// Throws UsageError "<source>: key N <problem>" for a bad key (`position` is 1-based).
void check_api_key(std::string_view key, std::string_view source, size_t position = 1);
// The keys of a list, checked as above. An empty list is not an error here.
std::vector<std::string> parse_api_keys(std::string_view text, std::string_view source);

// 256 random bits from the kernel, as 64 hex digits: a node's internal key. Throws RuntimeFailure
// when the kernel gives none.
std::string random_api_key();

// The request's Bearer key looked up in `keys`: its owners, or null after answering 401 (an
// OpenAI-style body, code invalid_api_key, and WWW-Authenticate: Bearer) — the message says
// whether a key was missing or not valid, never which key was sent.
const std::vector<size_t>* authorize(const HttpRequest& request, const ApiKeyTable& keys,
                                     HttpResponse& response);

}  // namespace gpufrac
