// Parsing and validation of an OpenAI POST /v1/chat/completions body: the messages go through the
// model's chat template (with the generation prompt) and the tokenizer; the rest is read as for
// /v1/completions (parse_generation_fields), except that max_completion_tokens is preferred to
// max_tokens and the default length is what the context leaves.
//
// Messages: {"role": "system"|"user"|"assistant", "content": a string, an array of
// {"type": "text", "text": ...} parts (joined with "\n", as vLLM does), or null}. Also read:
// add_generation_prompt (true), chat_template_kwargs.enable_thinking (true; Qwen3's template),
// add_special_tokens (false). Unless ignore_eos, the template's end-of-turn ids (<|im_end|>, ...)
// join stop_token_ids, so generation stops at the end of the assistant's turn with "stop".
// Refused: tools, tool calls, other content part types, non-text response_format, logprobs.
//
// Never throws on any input (see completion_request.h). Pure functions; thread-safe.
#pragma once

#include <string_view>
#include <variant>
#include <vector>

#include "engine/api/completion_request.h"
#include "engine/tokenizer/chat_template.h"

namespace gpufrac::engine {

std::variant<CompletionRequest, RequestError> parse_chat_completion_request(
    std::string_view body, const CompletionLimits& limits);

// For /v1/chat/completions and /tokenize (throw RequestInvalid): body["messages"] as ChatMessages,
// and the prompt ids of `body` ("messages" + add_generation_prompt, chat_template_kwargs,
// add_special_tokens) through the chat template.
std::vector<ChatMessage> parse_chat_messages(const Json& body);
std::vector<int32_t> chat_prompt_ids(const Json& body, const CompletionLimits& limits);

}  // namespace gpufrac::engine
