#include "engine/api/chat_prompt.h"

#include <stdexcept>
#include <string>

#include "engine/tokenizer/chat_template.h"

namespace gpufrac::engine {

namespace {

std::string message_content(const Json& content, const std::string& where) {
  if (content.is_null()) return {};
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    fail(where + " must be a string or an array of text parts, got " + describe(content),
         "messages");
  }
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const Json& part = content[j];
    const std::string at = where + "[" + std::to_string(j) + "]";
    if (!part.is_object())
      fail(at + " must be an object {\"type\": \"text\", \"text\": ...}", "messages");
    const Json* type = field(part, "type");
    if (!type || !type->is_string()) fail(at + ".type must be a string", "messages");
    if (*type != "text") {
      fail(at + ": only \"text\" parts are supported, got type " + describe(*type), "messages");
    }
    const Json* part_text = field(part, "text");
    if (!part_text || !part_text->is_string()) fail(at + ".text must be a string", "messages");
    if (j > 0) text += '\n';
    text += part_text->get<std::string>();
  }
  return text;
}

// body["messages"] as ChatMessages.
std::vector<ChatMessage> parse_chat_messages(const Json& body) {
  const Json* messages = field(body, "messages");
  if (!messages) fail("'messages' is required: an array of {\"role\", \"content\"}", "messages");
  if (!messages->is_array() || messages->empty()) {
    fail("'messages' must be a non-empty array of {\"role\", \"content\"}", "messages");
  }
  std::vector<ChatMessage> out;
  out.reserve(messages->size());
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) fail(where + " must be an object {\"role\", \"content\"}", "messages");
    const Json* role = field(m, "role");
    if (!role || !role->is_string()) fail(where + ".role must be a string", "messages");
    if (const Json* calls = field(m, "tool_calls");
        calls && !(calls->is_array() && calls->empty())) {
      fail(where + ": tool calls are not supported by this server", "messages");
    }
    auto content = m.find("content");
    out.push_back({role->get<std::string>(), content == m.end()
                                                 ? std::string()
                                                 : message_content(*content, where + ".content")});
  }
  return out;
}

}  // namespace

std::vector<int32_t> chat_prompt_ids(const Json& body, const RequestLimits& limits) {
  const Tokenizer& tokenizer = require_tokenizer(limits, "chat messages", "messages");
  if (!limits.tokenizer->chat_template) {
    fail("the model has no supported chat template (qwen3, chatml or llama3) in " +
             limits.tokenizer->directory +
             "/tokenizer_config.json: start gpufrac serve with --chat-template NAME",
         "messages");
  }
  std::vector<ChatMessage> messages = parse_chat_messages(body);
  ChatTemplateOptions options;
  options.add_generation_prompt = get_bool(body, "add_generation_prompt").value_or(true);
  if (const Json* kwargs = get_object(body, "chat_template_kwargs")) {
    options.enable_thinking = get_bool(*kwargs, "enable_thinking").value_or(true);
  }
  std::string prompt;
  try {
    prompt = apply_chat_template(*limits.tokenizer->chat_template, messages, options);
  } catch (const std::invalid_argument& e) {
    fail(e.what(), "messages");
  }
  EncodeOptions encode;
  encode.add_special_tokens = get_bool(body, "add_special_tokens").value_or(false);
  std::vector<int32_t> ids = tokenizer.encode(prompt, encode);
  if (ids.empty()) fail("the messages make an empty prompt", "messages");
  check_encoded_ids(ids, limits, "messages");
  return ids;
}

}  // namespace gpufrac::engine
