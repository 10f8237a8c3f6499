#include "engine/api/chat_request.h"

#include <algorithm>
#include <stdexcept>

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

void refuse_chat_only_fields(const Json& body) {
  if (const Json* tools = field(body, "tools"); tools && !(tools->is_array() && tools->empty())) {
    fail("'tools' are not supported by this server", "tools");
  }
  if (const Json* choice = field(body, "tool_choice");
      choice && *choice != "none" && *choice != "auto") {
    fail("'tool_choice' is not supported (only \"none\")", "tool_choice");
  }
  if (const Json* format = field(body, "response_format");
      format && !(format->is_object() && format->value("type", Json()) == "text")) {
    fail("'response_format' is not supported (only {\"type\": \"text\"})", "response_format");
  }
  if (get_bool(body, "logprobs").value_or(false))
    fail("'logprobs' is not supported yet", "logprobs");
  if (field(body, "top_logprobs")) fail("'top_logprobs' is not supported yet", "top_logprobs");
  if (get_bool(body, "echo").value_or(false)) fail("'echo' is not supported", "echo");
  if (get_bool(body, "continue_final_message").value_or(false)) {
    fail("'continue_final_message' is not supported", "continue_final_message");
  }
}

CompletionRequest parse(std::string_view text, const CompletionLimits& limits) {
  Json body = parse_body(text);
  check_model(body, limits.served_model_name);
  refuse_unsupported_sampling(body);
  refuse_chat_only_fields(body);
  CompletionRequest r;
  r.engine.prompt = chat_prompt_ids(body, limits);
  parse_generation_fields(body, limits, /*chat=*/true, r);
  if (!r.engine.stop.ignore_eos) {
    std::vector<int32_t>& ids = r.engine.stop.stop_token_ids;
    for (int32_t id : limits.text->chat_stop_ids) {
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    }
  }
  return r;
}

}  // namespace

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

std::vector<int32_t> chat_prompt_ids(const Json& body, const CompletionLimits& limits) {
  const Tokenizer& tokenizer = require_tokenizer(limits, "chat messages", "messages");
  if (!limits.text->chat_template) {
    fail("the model has no supported chat template (qwen3, chatml or llama3) in " +
             limits.text->directory +
             "/tokenizer_config.json: start gpufrac serve with --chat-template NAME",
         "messages");
  }
  std::vector<ChatMessage> messages = parse_chat_messages(body);
  ChatTemplateOptions options;
  options.add_generation_prompt = get_bool(body, "add_generation_prompt").value_or(true);
  if (const Json* kwargs = field(body, "chat_template_kwargs")) {
    if (!kwargs->is_object())
      fail("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    options.enable_thinking = get_bool(*kwargs, "enable_thinking").value_or(true);
  }
  std::string prompt;
  try {
    prompt = apply_chat_template(*limits.text->chat_template, messages, options);
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

std::variant<CompletionRequest, RequestError> parse_chat_completion_request(
    std::string_view body, const CompletionLimits& limits) {
  return parse_request<CompletionRequest>([&] { return parse(body, limits); });
}

}  // namespace gpufrac::engine
