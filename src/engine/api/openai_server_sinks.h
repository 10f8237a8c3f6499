// The RequestSinks of the OpenAI server: each turns one request's sampled tokens into its HTTP
// response, in the layout of /v1/completions ("text_completion") or /v1/chat/completions
// ("chat.completion", "chat.completion.chunk"), as OpenAI and vLLM send them.
//
// Streaming (SSE): completions send one chunk per sampled token ({"text", "token_ids"}; text may
// be empty while a character or a possible stop string is held back); chat sends a first chunk
// with delta {"role": "assistant", "content": ""}, then a chunk per non-empty text delta. The
// chunk of the last token carries finish_reason (chat: delta {} when it adds no text). With
// include_usage every chunk has "usage": null and a last chunk has "choices": [] and the usage.
// Then "data: [DONE]". A failed request gets an error event; a cancelled one just [DONE].
// Non-streaming: one JSON body (choices[0].text + token_ids, or choices[0].message) with usage;
// 500 for a failed request, 503 for one cancelled by a stopping server.
// "logprobs" is null unless the request asked for them; then it holds those of the choice's
// tokens in the endpoint's layout (logprobs_json.h): per completions chunk its token's, per chat
// chunk the tokens since the previous chunk (a token that adds no text sends no chat chunk).
//
// With n choices (EngineRequest::n) every chunk carries one choice under its "index" (chat: each
// choice has its own role chunk and finish chunk), and the body lists the choices in index
// order; usage sums their completion tokens.
//
// Text comes from a GeneratedText per choice. When a stop string matches, the sink asks the
// engine to finish that choice (Engine::stop_request) and reports finish_reason "stop".
// Sinks run on the engine thread only (RequestSink's contract).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/http_server.h"
#include "common/json.h"
#include "engine/api/generated_text.h"
#include "engine/api/generation_request.h"
#include "engine/engine.h"

namespace gpufrac::engine {

struct SinkSetup {
  Engine* engine = nullptr;  // borrowed
  uint64_t request_id = 0;
  std::shared_ptr<HttpResponse> response;
  GenerationEndpoint endpoint = GenerationEndpoint::kCompletions;  // the response's layout
  // {"id", "object", "created", "model"}: the head of the body or of every chunk.
  Json head;
  bool include_usage = false;
  const Tokenizer* tokenizer = nullptr;  // borrowed; null: ids as text
  GeneratedTextOptions text;
  // A resumed request's resume_token_ids (resume_request.h): they prime the text (their text was
  // sent by the interrupted run) and count in usage as generated, not as prompt.
  std::vector<int32_t> resumed_ids;
  bool logprobs = false;  // the request asked for logprobs (EngineRequest::logprobs >= 0)
  int choices = 1;        // EngineRequest::n
  std::string echo_text;  // completions "echo": starts each choice's text (its first chunk)
};

std::shared_ptr<RequestSink> make_streaming_sink(SinkSetup setup);
std::shared_ptr<RequestSink> make_buffered_sink(SinkSetup setup);

}  // namespace gpufrac::engine
