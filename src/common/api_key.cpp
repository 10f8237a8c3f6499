#include "common/api_key.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/strings.h"

namespace gpufrac {
namespace {

constexpr size_t kMaxKeyLength = 512;

bool is_separator(char c) {
  return c == ',' || c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

}  // namespace

std::string_view bearer_token(std::string_view authorization) {
  std::string_view value = trim(authorization);
  constexpr std::string_view kScheme = "bearer";
  if (value.size() <= kScheme.size() ||
      (value[kScheme.size()] != ' ' && value[kScheme.size()] != '\t'))
    return {};
  for (size_t i = 0; i < kScheme.size(); ++i) {
    char c = value[i];
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
    if (c != kScheme[i]) return {};
  }
  return trim(value.substr(kScheme.size()));
}

bool keys_equal(std::string_view presented, std::string_view key) {
  // Every byte of `key` is compared and the differences are ORed, with no early exit: the loop
  // takes as long for a guess that shares the key's first bytes as for one that shares none.
  unsigned diff = presented.size() == key.size() ? 0u : 1u;
  for (size_t i = 0; i < key.size(); ++i) {
    unsigned char p = i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
    diff |= p ^ static_cast<unsigned char>(key[i]);
  }
  return diff == 0;
}

void ApiKeyTable::add(const std::string& key, size_t owner) {
  for (Entry& e : entries_) {
    if (e.key != key) continue;
    for (size_t o : e.owners) {
      if (o == owner) return;
    }
    e.owners.push_back(owner);
    return;
  }
  entries_.push_back({key, {owner}});
}

const std::vector<size_t>* ApiKeyTable::find(std::string_view presented) const {
  const Entry* match = nullptr;
  for (const Entry& e : entries_) {
    if (keys_equal(presented, e.key)) match = &e;  // every key is compared, match or not
  }
  return match ? &match->owners : nullptr;
}

std::string api_key_problem(std::string_view key) {
  if (key.empty()) return "is empty; give keys of 1 to 512 printable ASCII characters";
  if (key.size() > kMaxKeyLength) {
    return "is longer than 512 characters; give keys of 1 to 512 printable ASCII characters";
  }
  for (char c : key) {
    if (c <= ' ' || c > '~' || c == ',') {
      return "has a character an Authorization header cannot carry (a space, comma, control or "
             "non-ASCII byte); give keys of printable ASCII characters without spaces or commas";
    }
  }
  return {};
}

void check_api_key(std::string_view key, std::string_view source, size_t position) {
  if (std::string problem = api_key_problem(key); !problem.empty()) {
    throw UsageError(std::string(source) + ": key " + std::to_string(position) + " " + problem);
  }
}

std::vector<std::string> parse_api_keys(std::string_view text, std::string_view source) {
  std::vector<std::string> keys;
  for (const std::string& line : split(text, '\n')) {
    if (trim(line).starts_with('#')) continue;
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && is_separator(line[i])) ++i;
      size_t start = i;
      while (i < line.size() && !is_separator(line[i])) ++i;
      if (i == start) continue;
      std::string key = line.substr(start, i - start);
      check_api_key(key, source, keys.size() + 1);
      keys.push_back(std::move(key));
    }
  }
  return keys;
}

std::string random_api_key() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw RuntimeFailure(std::string("cannot draw a random key: ") + std::strerror(errno));
    got += size_t(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string key;
  for (unsigned char b : bytes) {
    key += kHex[b >> 4];
    key += kHex[b & 15];
  }
  return key;
}

const std::vector<size_t>* authorize(const HttpRequest& request, const ApiKeyTable& keys,
                                     HttpResponse& response) {
  std::string_view token = bearer_token(request.header("authorization"));
  const std::vector<size_t>* owners = token.empty() ? nullptr : keys.find(token);
  if (owners) return owners;
  std::string message =
      token.empty() ? "this endpoint needs an API key: send it as 'Authorization: Bearer KEY'"
                    : "the API key is not valid here; check the key you were given";
  response.send(401, "application/json",
                openai_error_body(message, "authentication_error", {}, "invalid_api_key"),
                {"WWW-Authenticate: Bearer"});
  return nullptr;
}

}  // namespace gpufrac
