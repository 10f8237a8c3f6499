#include "engine/api/tokenize_request.h"

#include "engine/api/chat_prompt.h"

namespace gpufrac::engine {

namespace {

void check_length(size_t count, const RequestLimits& limits, const char* what, const char* param) {
  if (count > size_t(limits.max_model_len)) {
    fail("This model's maximum context length is " + std::to_string(limits.max_model_len) +
             " tokens. However, you requested " + std::to_string(count) + " tokens in the " + what +
             ": reduce its length",
         param);
  }
}

Json tokenize(std::string_view text, const RequestLimits& limits) {
  Json body = parse_body(text);
  check_model(body, limits.served_model_name);
  const bool chat = body.contains("messages");
  const Tokenizer& tokenizer = require_tokenizer(limits, chat ? "chat messages" : "text prompts",
                                                 chat ? "messages" : "prompt");
  std::vector<int32_t> ids;
  if (chat) {
    ids = chat_prompt_ids(body, limits);
  } else {
    const Json* prompt = field(body, "prompt");
    if (!prompt) fail("'prompt' (text) or 'messages' is required", "prompt");
    if (!prompt->is_string()) fail("'prompt' must be a string", "prompt");
    EncodeOptions options;
    options.add_special_tokens = get_bool(body, "add_special_tokens").value_or(true);
    ids = tokenizer.encode(prompt->get_ref<const std::string&>(), options);
  }
  check_length(ids.size(), limits, chat ? "messages" : "prompt", chat ? "messages" : "prompt");
  check_encoded_ids(ids, limits, chat ? "messages" : "prompt");
  Json reply = {{"count", ids.size()}, {"max_model_len", limits.max_model_len}, {"tokens", ids}};
  if (get_bool(body, "return_token_strs").value_or(false)) {
    Json strs = Json::array();
    for (int32_t id : ids) strs.push_back(tokenizer.token_string(id));
    reply["token_strs"] = std::move(strs);
  } else {
    reply["token_strs"] = nullptr;
  }
  return reply;
}

Json detokenize(std::string_view text, const RequestLimits& limits) {
  Json body = parse_body(text);
  check_model(body, limits.served_model_name);
  const Tokenizer& tokenizer = require_tokenizer(limits, "token ids to detokenize", "tokens");
  const Json* tokens = field(body, "tokens");
  if (!tokens) fail("'tokens' is required: an array of token ids", "tokens");
  if (!tokens->is_array()) fail("'tokens' must be an array of token ids", "tokens");
  check_length(tokens->size(), limits, "tokens", "tokens");
  std::vector<int32_t> ids = get_token_ids(*tokens, limits.vocab_size, "tokens", "tokens");
  return {{"prompt", tokenizer.decode(ids, /*skip_special_tokens=*/false)}};
}

}  // namespace

std::variant<Json, RequestError> tokenize_reply(std::string_view body,
                                                const RequestLimits& limits) {
  return parse_request<Json>([&] { return tokenize(body, limits); });
}

std::variant<Json, RequestError> detokenize_reply(std::string_view body,
                                                  const RequestLimits& limits) {
  return parse_request<Json>([&] { return detokenize(body, limits); });
}

}  // namespace gpufrac::engine
