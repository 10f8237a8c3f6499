// UTF-8 validation the way decoders must do it for text shown to users: well-formed characters
// pass, and each "maximal subpart" of an ill-formed sequence becomes one U+FFFD (the Unicode
// recommendation that Rust's from_utf8_lossy, Python's errors="replace" and JavaScript's
// TextDecoder follow). A sequence cut off by the end of the input is reported separately so a
// streaming decoder can wait for the rest. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpufrac::engine {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

enum class Utf8Status {
  kValid,      // a whole well-formed character
  kInvalid,    // an ill-formed maximal subpart: replace with one U+FFFD
  kTruncated,  // a well-formed prefix that runs into the end of the input
};

struct Utf8Step {
  Utf8Status status;
  uint32_t length;  // bytes, >= 1
};

// Classifies the bytes at pos (pos < bytes.size()).
Utf8Step utf8_step(std::string_view bytes, size_t pos);

// Appends `bytes` to `out` with every ill-formed or truncated sequence replaced by U+FFFD.
void append_lossy_utf8(std::string_view bytes, std::string& out);

}  // namespace gpufrac::engine
