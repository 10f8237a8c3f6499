#include "engine/api/generation_request.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/api/chat_prompt.h"
#include "engine/api/resume_request.h"

namespace gpufrac::engine {

namespace {

// A number in [min, max], or `absent` when the field is absent or null.
double get_number_in(const Json& body, const char* name, int min, int max, double absent) {
  const double x = get_number(body, name).value_or(absent);
  if (!(x >= min && x <= max)) {
    fail(std::string("'") + name + "' must be between " + std::to_string(min) + " and " +
             std::to_string(max) + ", got " + describe(body[name]),
         name);
  }
  return x;
}

// "logit_bias": {"<token id>": bias in [-100, 100], ...} (OpenAI's layout: ids as decimal keys).
std::vector<LogitBias> get_logit_bias(const Json& body, int vocab_size) {
  const Json* object = get_object(body, "logit_bias");
  std::vector<LogitBias> biases;
  if (!object) return biases;
  for (const auto& [key, value] : object->items()) {
    const std::string where = "logit_bias[" + describe(Json(key)) + "]";
    int64_t id = -1;
    auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (error != std::errc() || end != key.data() + key.size() || key.empty()) {
      fail(where + ": keys must be token ids written as decimal strings", "logit_bias");
    }
    if (id < 0 || id >= vocab_size) {
      fail(where + ": token id " + key + " is outside the vocabulary [0, " +
               std::to_string(vocab_size) + ")",
           "logit_bias");
    }
    if (!value.is_number() || !(value.get<double>() >= -100 && value.get<double>() <= 100)) {
      fail(where + " must be a number between -100 and 100, got " + describe(value), "logit_bias");
    }
    biases.push_back({static_cast<int32_t>(id), value.get<float>()});
  }
  return biases;
}

// The text of a token-id prompt, as the response shows generated ids: decoded (special tokens as
// skip_special_tokens says), or " 1234" per id without a tokenizer.
std::string prompt_text(const std::vector<int32_t>& ids, const RequestLimits& limits,
                        bool skip_special_tokens) {
  if (limits.tokenizer && limits.tokenizer->get()) {
    return limits.tokenizer->get()->decode(ids, skip_special_tokens);
  }
  std::string text;
  for (int32_t id : ids) text += " " + std::to_string(id);
  return text;
}

// The one pass over the body, in the order the header lists.
GenerationRequest parse(std::string_view text, const RequestLimits& limits,
                        GenerationEndpoint endpoint) {
  const bool chat = endpoint == GenerationEndpoint::kChatCompletions;
  Json body = parse_body(text);
  check_model(body, limits.served_model_name);
  const Json* prompt = chat ? nullptr : field(body, "prompt");
  if (!chat && !prompt) fail("'prompt' is required (text or an array of token ids)", "prompt");

  // Refusals, before the prompt is encoded: each field once, its neutral value passes.
  const int n = static_cast<int>(get_int(body, "n", 1, kMaxChoices).value_or(1));
  if (get_int(body, "best_of", 1, INT32_MAX).value_or(n) != n) {
    fail("'best_of' other than 'n' is not supported (the best of several choices is not picked)",
         "best_of");
  }
  if (chat) {
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
  }
  const bool echo = get_bool(body, "echo").value_or(false);
  if (echo && chat) fail("'echo' is only supported by /v1/completions", "echo");
  if (echo && field(body, "logprobs")) {
    fail(
        "'echo' with 'logprobs' is not supported: it needs the prompt's logprobs, which this "
        "server does not compute; drop one of them",
        "echo");
  }
  if (chat) {
    if (get_bool(body, "continue_final_message").value_or(false)) {
      fail("'continue_final_message' is not supported", "continue_final_message");
    }
  } else {
    if (field(body, "suffix")) fail("'suffix' is not supported", "suffix");
  }

  // The prompt, as token ids.
  GenerationRequest r;
  EngineRequest& e = r.engine;
  e.n = n;
  bool echo_ids = false;  // echo a token-id prompt: its text once skip_special_tokens is known
  if (chat) {
    e.prompt = chat_prompt_ids(body, limits);
  } else {
    const Json* p = prompt;
    std::string where = "prompt";
    if (p->is_array() && !p->empty() && ((*p)[0].is_array() || (*p)[0].is_string())) {
      if (p->size() != 1) {
        fail("batched prompts are not supported: send one prompt per request", "prompt");
      }
      p = &(*p)[0];
      where = "prompt[0]";
    }
    if (p->is_string()) {
      const Tokenizer& tokenizer = require_tokenizer(limits, "text prompts", "prompt");
      EncodeOptions options;
      options.add_special_tokens = get_bool(body, "add_special_tokens").value_or(true);
      e.prompt = tokenizer.encode(p->get_ref<const std::string&>(), options);
      if (e.prompt.empty()) fail("'prompt' is empty", "prompt");
      check_encoded_ids(e.prompt, limits, "prompt");
      if (echo) r.echo_text = p->get<std::string>();
    } else {
      if (!p->is_array()) fail("'prompt' must be a string or an array of token ids", "prompt");
      if (p->empty()) fail("'prompt' is empty", "prompt");
      e.prompt = get_token_ids(*p, limits.vocab_size, where, "prompt");
      echo_ids = echo;
    }
  }

  // Lengths: the prompt and the completion share max_model_len.
  const int64_t prompt_len = static_cast<int64_t>(e.prompt.size());
  const int64_t room = limits.max_model_len - prompt_len;
  if (room < 1) {
    fail("This model's maximum context length is " + std::to_string(limits.max_model_len) +
             " tokens, and the prompt alone has " + std::to_string(prompt_len) +
             ": shorten the prompt",
         chat ? "messages" : "prompt");
  }
  const char* max_name = "max_completion_tokens";
  std::optional<int64_t> max_tokens = get_int(body, max_name, 1, INT32_MAX);
  if (!max_tokens) {
    max_name = "max_tokens";
    max_tokens = get_int(body, max_name, 1, INT32_MAX);
  }
  if (max_tokens && prompt_len + *max_tokens > limits.max_model_len) {
    fail("This model's maximum context length is " + std::to_string(limits.max_model_len) +
             " tokens. However, you requested " + std::to_string(prompt_len + *max_tokens) +
             " tokens (" + std::to_string(prompt_len) + " in the prompt, " +
             std::to_string(*max_tokens) + " in the completion): reduce the prompt or " + max_name,
         max_name);
  }
  const int64_t default_max = chat ? room : std::min<int64_t>(16, room);
  e.stop.max_tokens =
      static_cast<int>(std::min<int64_t>(max_tokens.value_or(default_max), INT32_MAX));
  e.stop.min_tokens =
      static_cast<int>(get_int(body, "min_tokens", 0, e.stop.max_tokens).value_or(0));

  // Stops.
  e.stop.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
  if (const Json* ids = field(body, "stop_token_ids")) {
    if (!ids->is_array()) fail("'stop_token_ids' must be an array of token ids", "stop_token_ids");
    e.stop.stop_token_ids =
        get_token_ids(*ids, limits.vocab_size, "stop_token_ids", "stop_token_ids");
  }
  if (chat && !e.stop.ignore_eos) {  // chat_prompt_ids() found the tokenizer
    std::vector<int32_t>& ids = e.stop.stop_token_ids;
    for (int32_t id : limits.tokenizer->chat_stop_ids) {
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    }
  }
  r.stop_strings = get_strings(body, "stop", kMaxStopStrings, kMaxStopStringBytes);
  std::erase(r.stop_strings, std::string());  // an empty stop string would match everywhere
  if (!r.stop_strings.empty()) require_tokenizer(limits, "'stop' strings", "stop");
  r.skip_special_tokens = get_bool(body, "skip_special_tokens").value_or(true);
  if (echo_ids) r.echo_text = prompt_text(e.prompt, limits, r.skip_special_tokens);

  // Sampling.
  const double temperature = get_number(body, "temperature").value_or(1.0);
  if (temperature < 0 || temperature > 100) {
    fail("'temperature' must be in [0, 100]", "temperature");
  }
  e.temperature = static_cast<float>(temperature);
  const double top_p = get_number(body, "top_p").value_or(1.0);
  if (!(top_p > 0 && top_p <= 1)) fail("'top_p' must be in (0, 1]", "top_p");
  e.top_p = static_cast<float>(top_p);
  const int64_t top_k = get_int(body, "top_k", -1, INT32_MAX).value_or(0);
  e.top_k = top_k < 0 ? 0 : static_cast<int>(top_k);  // -1 (vLLM's "off") = 0 here
  if (const Json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) fail("'seed' must be an integer", "seed");
    e.seed = seed->is_number_unsigned() ? seed->get<uint64_t>()
                                        : static_cast<uint64_t>(seed->get<int64_t>());
  }
  e.min_p = static_cast<float>(get_number_in(body, "min_p", 0, 1, 0));
  e.penalties.presence = static_cast<float>(get_number_in(body, "presence_penalty", -2, 2, 0));
  e.penalties.frequency = static_cast<float>(get_number_in(body, "frequency_penalty", -2, 2, 0));
  const double repetition = get_number(body, "repetition_penalty").value_or(1.0);
  if (!(repetition > 0)) fail("'repetition_penalty' must be greater than 0", "repetition_penalty");
  e.penalties.repetition = static_cast<float>(repetition);
  e.logit_bias = get_logit_bias(body, limits.vocab_size);
  // Logprobs: a count in completions, a flag with a count beside it in chat.
  if (chat) {
    const bool logprobs = get_bool(body, "logprobs").value_or(false);
    const int64_t top = get_int(body, "top_logprobs", 0, kMaxTopLogprobs).value_or(0);
    if (top > 0 && !logprobs) {
      fail("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    }
    e.logprobs = logprobs ? static_cast<int>(top) : -1;
  } else {
    e.logprobs = static_cast<int>(get_int(body, "logprobs", 0, kMaxTopLogprobs).value_or(-1));
  }

  // Streaming.
  r.stream = get_bool(body, "stream").value_or(false);
  if (const Json* options = get_object(body, "stream_options")) {
    if (!r.stream) fail("'stream_options' is only allowed when 'stream' is true", "stream_options");
    r.include_usage = get_bool(*options, "include_usage").value_or(false);
  }

  // Resumption.
  if (endpoint == GenerationEndpoint::kCompletions) {
    r.resume_token_ids = parse_resume_token_ids(body, limits, e);
  }
  return r;
}

}  // namespace

std::variant<GenerationRequest, RequestError> parse_generation_request(
    std::string_view body, const RequestLimits& limits, GenerationEndpoint endpoint) {
  return parse_request<GenerationRequest>([&] { return parse(body, limits, endpoint); });
}

}  // namespace gpufrac::engine
