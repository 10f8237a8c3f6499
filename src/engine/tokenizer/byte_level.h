// The GPT-2 "ByteLevel" alphabet: each of the 256 byte values is written as one printable Unicode
// character (bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF as themselves, the other 68 as U+0100 and
// up, in byte order), so a byte-level vocabulary is a set of strings. We convert the vocabulary
// back to raw bytes once at load time and run BPE on bytes. Pure functions, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpufrac::engine {

// The raw bytes a ByteLevel token string stands for, or nullopt when it has a character outside
// the alphabet (or is not valid UTF-8).
std::optional<std::string> byte_level_to_bytes(std::string_view token);

// The ByteLevel string of raw bytes (the inverse of byte_level_to_bytes).
std::string bytes_to_byte_level(std::string_view bytes);

}  // namespace gpufrac::engine
