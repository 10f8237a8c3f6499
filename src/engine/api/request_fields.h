// Reading the fields of an OpenAI request body (completions, chat completions, tokenize) against
// the served model (RequestLimits): typed readers that throw RequestInvalid naming the field and
// the fix, and parse_request(), which runs a parser and turns whatever it throws into a
// RequestError. Nothing here escapes a parser: the server only ever sees a result or a
// RequestError. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/json.h"
#include "engine/api/served_tokenizer.h"

namespace gpufrac::engine {

// What the server answers for a bad request: an OpenAI-style error body with this status.
struct RequestError {
  int status = 400;
  std::string message;
  std::string param;  // the offending field, or empty
};

// Thrown by the readers below; caught by parse_request().
struct RequestInvalid {
  RequestError error;
};

[[noreturn]] void fail(std::string message, std::string param, int status = 400);

// What every body is read against: the served model. Borrows the ServedTokenizer.
struct RequestLimits {
  std::string served_model_name;
  int vocab_size = 0;
  int max_model_len = 0;
  const ServedTokenizer* tokenizer = nullptr;  // null or without a tokenizer: token ids only
};

// A value for an error message: scalars as JSON (cut short, on a character boundary), containers
// by type name only (dumping a deeply nested array would recurse without bound).
std::string describe(const Json& value);

// The body as a JSON object (fails for invalid JSON or another type).
Json parse_body(std::string_view text);
// `body[name]`, or null when absent or JSON null.
const Json* field(const Json& body, const char* name);
// An integer in [min, max], or nullopt when absent or null.
std::optional<int64_t> get_int(const Json& body, const char* name, int64_t min, int64_t max);
std::optional<double> get_number(const Json& body, const char* name);
std::optional<bool> get_bool(const Json& body, const char* name);
// An object, or null when absent or null.
const Json* get_object(const Json& body, const char* name);
// A string or an array of at most `max_count` strings, each at most `max_bytes` long; empty when
// absent or null.
std::vector<std::string> get_strings(const Json& body, const char* name, size_t max_count,
                                     size_t max_bytes);
// "model", when present, must be the served name (404 otherwise, as OpenAI and vLLM answer).
void check_model(const Json& body, const std::string& served_model_name);
// A token id in [0, vocab_size); `where` names it in the message ("prompt[3]").
int32_t get_token_id(const Json& value, int vocab_size, const std::string& where,
                     const char* param);
// Every element of `array` (a JSON array) as a token id; `where` names the array ("prompt[0]"),
// its elements are named where[i].
std::vector<int32_t> get_token_ids(const Json& array, int vocab_size, const std::string& where,
                                   const char* param);

// The tokenizer, or a 400 saying why the server has none and how to get it; `what` names what
// needs it ("text prompts").
const Tokenizer& require_tokenizer(const RequestLimits& limits, const std::string& what,
                                   const std::string& param);
// Text encoded by the tokenizer: every id must lie in the model's vocabulary (serve refuses a
// tokenizer that reaches past it; this keeps the engine's precondition whatever the setup).
void check_encoded_ids(const std::vector<int32_t>& ids, const RequestLimits& limits,
                       const char* param);

// Runs `parse` (which may throw RequestInvalid or anything else) and returns its result or the
// error it threw.
template <typename Result, typename Parse>
std::variant<Result, RequestError> parse_request(Parse&& parse) {
  try {
    return parse();
  } catch (const RequestInvalid& invalid) {
    return invalid.error;
  } catch (const std::exception& e) {
    return RequestError{400, std::string("invalid request: ") + e.what(), ""};
  }
}

}  // namespace gpufrac::engine
