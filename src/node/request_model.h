// Finds the "model" of an OpenAI request body without parsing all of it. A full JSON parse of a
// 2048-token prompt costs hundreds of microseconds, more than the router's whole latency budget;
// this scanner walks only the top-level object, skips other values by bracket counting (strings
// respected), and usually stops early ("model" tends to come before "prompt"). It validates only
// what it reads: the engine checks the rest of the body itself.
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace gpufrac {

struct RequestModel {
  std::string name;    // the decoded string value
  size_t begin = 0;    // the value's bytes in the body, quotes included: [begin, end)
  size_t end = 0;
};

enum class RequestModelError { kNone, kNotAnObject, kMissing, kNotAString };

// The top-level "model" string of `body`, or nullopt with `error` saying why not.
std::optional<RequestModel> find_request_model(std::string_view body, RequestModelError* error);

// `body` with the model value replaced by `name` (JSON-escaped).
std::string replace_request_model(std::string_view body, const RequestModel& model, std::string_view name);

}  // namespace gpufrac
