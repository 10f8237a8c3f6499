// What one SSE message of an OpenAI streaming response means for the measurement
// (docs/benchmark-metrics.md). A "content event" carries generated text: a
// completions choice with non-empty "text", or a chat choice whose delta has non-empty "content"
// or reasoning text. Role-only chunks, usage-only chunks, empty deltas and "[DONE]" are not
// content. A choice's non-null "finish_reason" ("length", "stop", ...) is reported whatever chunk
// carries it (vLLM puts it on the last content chunk; other servers send a chunk of its own,
// which is not content). Errors come as an "error" event, an {"error": {...}} object, or vLLM's
// {"object": "error", "message": ...}; unparseable data is an error too. Pure; thread-safe.
#pragma once

#include <optional>
#include <string>

#include "bench/sse_parser.h"

namespace gpufrac {

struct StreamEvent {
  bool done = false;     // "data: [DONE]"
  bool content = false;  // carries generated text (counts for TTFT, ITL and chunk gaps)
  std::optional<int64_t> prompt_tokens;      // from "usage", when present
  std::optional<int64_t> completion_tokens;  // from "usage", when present
  std::optional<std::string> finish_reason;  // the first choice's, when non-null
  std::optional<std::string> error;          // the server's message, when this is an error
};

StreamEvent interpret_stream_message(const SseMessage& message);

}  // namespace gpufrac
