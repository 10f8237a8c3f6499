// Hashing and comparing short byte strings (the tokenizer's pieces) with fixed-size loads: the
// word cache and the vocabulary index share one hash, so a piece is hashed once for both.
// hash_bytes() is never 0; hash_tag() is its upper half, never 0 either (0 marks an empty slot
// in both tables). Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace gpufrac::engine {

inline uint32_t load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline uint64_t load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// a[0, n) == b[0, n), with fixed-size loads (the last one may overlap the one before).
inline bool same_bytes(const char* a, const char* b, size_t n) {
  if (n >= 8) {
    for (size_t i = 0; i + 8 < n; i += 8) {
      if (load64(a + i) != load64(b + i)) return false;
    }
    return load64(a + n - 8) == load64(b + n - 8);
  }
  if (n >= 4) return load32(a) == load32(b) && load32(a + n - 4) == load32(b + n - 4);
  return n == 0 || (a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1]);
}

// The last n < 8 bytes as a number (n is hashed separately), with fixed-size loads: a
// variable-length memcpy here was a library call per word.
inline uint64_t tail_bytes(const char* p, size_t n) {
  if (n >= 4) return uint64_t(load32(p)) << 32 | load32(p + n - 4);
  if (n == 0) return 0;
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return uint64_t(b[0]) << 16 | uint64_t(b[n / 2]) << 8 | b[n - 1];
}

inline uint64_t hash_bytes(std::string_view bytes) {
  const char* p = bytes.data();
  const size_t n = bytes.size();
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    h = (h ^ load64(p + i)) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  h = (h ^ tail_bytes(p + i, n - i)) * 0x94D049BB133111EBull;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return h | 1;
}

inline uint32_t hash_tag(uint64_t hash) {
  return uint32_t(hash >> 32) | 1;
}

}  // namespace gpufrac::engine
