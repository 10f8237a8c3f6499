// Chat templates: a list of messages -> the prompt text the model was trained on. Not a Jinja
// engine: each supported template is written out by hand and checked, string for string, against
// the Jinja template shipped in the model's tokenizer_config.json (tests render both).
//
//   kQwen3   Qwen3's template for system/user/assistant turns (no tools): a leading system
//            message first; assistant turns before the last user turn lose their <think>...</think>
//            part, turns after it keep it as "<think>\n{reasoning}\n</think>\n\n"; the generation
//            prompt is "<|im_start|>assistant\n", plus "<think>\n\n</think>\n\n" when thinking is
//            disabled (enable_thinking=false).
//   kChatMl  plain ChatML (Qwen2-style): "<|im_start|>{role}\n{content}<|im_end|>\n" per message,
//            generation prompt "<|im_start|>assistant\n" (no default system message).
//   kLlama3  Llama 3 Instruct: "<|begin_of_text|>" then per message
//            "<|start_header_id|>{role}<|end_header_id|>\n\n{content, stripped}<|eot_id|>",
//            generation prompt "<|start_header_id|>assistant<|end_header_id|>\n\n".
//
// The result is text: encode it with parse_special so the markers become their token ids.
// Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace gpufrac::engine {

enum class ChatTemplateKind { kQwen3, kChatMl, kLlama3 };

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  bool enable_thinking = true;  // Qwen3 only: false appends an empty think block to the prompt
};

// Throws std::invalid_argument naming the message ("messages[2].role: 'tool' is not supported
// ...") for a role other than system/user/assistant, and for an empty list.
std::string apply_chat_template(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                const ChatTemplateOptions& options = {});

// Which kind a Jinja chat template (tokenizer_config.json "chat_template") is, by its markers:
// <|im_start|> with <think> -> kQwen3, <|im_start|> -> kChatMl, <|start_header_id|> -> kLlama3.
std::optional<ChatTemplateKind> detect_chat_template(std::string_view jinja_source);
// "qwen3" | "chatml" | "llama3".
std::optional<ChatTemplateKind> chat_template_from_name(std::string_view name);
std::string_view chat_template_name(ChatTemplateKind kind);

// The kind named by <model_dir>/tokenizer_config.json's chat_template; nullopt when the file, the
// field or a recognisable template is missing.
std::optional<ChatTemplateKind> read_chat_template_kind(const std::string& model_dir);

// Ids of the tokens that end an assistant turn, which stop generation: <|im_end|> and
// <|endoftext|> for ChatML/Qwen3; <|eot_id|>, <|end_of_text|> and <|eom_id|> for Llama 3 (those
// the tokenizer has).
std::vector<int32_t> chat_stop_token_ids(ChatTemplateKind kind, const Tokenizer& tokenizer);

}  // namespace gpufrac::engine
