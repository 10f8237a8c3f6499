#include "engine/api/completion_request.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "engine/api/resume_request.h"

namespace gpufrac::engine {

const Tokenizer& require_tokenizer(const CompletionLimits& limits, const std::string& what,
                                   const std::string& param) {
  if (limits.text && limits.text->get()) return *limits.text->get();
  std::string why = limits.text && !limits.text->unavailable.empty()
                        ? limits.text->unavailable
                        : "the server was started without one";
  fail(what + " need the model's tokenizer, and this server has none: " + why +
           ". Run scripts/install-deps (it fetches the Qwen3 tokenizer) or give gpufrac serve "
           "--tokenizer DIR, and restart; token-id prompts work without it",
       param);
}

void check_encoded_ids(const std::vector<int32_t>& ids, const CompletionLimits& limits,
                       const char* param) {
  for (int32_t id : ids) {
    if (id >= limits.vocab_size) {
      fail("the tokenizer made token id " + std::to_string(id) +
               ", outside the model's vocabulary [0, " + std::to_string(limits.vocab_size) +
               "): the server's tokenizer does not fit its model",
           param, 500);
    }
  }
}

namespace {

// The one place a completions prompt becomes token ids.
std::vector<int32_t> prompt_tokens(const Json& body, const Json& prompt,
                                   const CompletionLimits& limits) {
  const Json* p = &prompt;
  std::string where = "prompt";
  if (prompt.is_array() && !prompt.empty() && (prompt[0].is_array() || prompt[0].is_string())) {
    if (prompt.size() != 1) {
      fail("batched prompts are not supported: send one prompt per request", "prompt");
    }
    p = &prompt[0];
    where = "prompt[0]";
  }
  if (p->is_string()) {
    const Tokenizer& tokenizer = require_tokenizer(limits, "text prompts", "prompt");
    EncodeOptions options;
    options.add_special_tokens = get_bool(body, "add_special_tokens").value_or(true);
    std::vector<int32_t> tokens = tokenizer.encode(p->get_ref<const std::string&>(), options);
    if (tokens.empty()) fail("'prompt' is empty", "prompt");
    check_encoded_ids(tokens, limits, "prompt");
    return tokens;
  }
  if (!p->is_array()) fail("'prompt' must be a string or an array of token ids", "prompt");
  if (p->empty()) fail("'prompt' is empty", "prompt");
  std::vector<int32_t> tokens;
  tokens.reserve(p->size());
  for (size_t i = 0; i < p->size(); ++i) {
    tokens.push_back(
        get_token_id((*p)[i], limits.vocab_size, where + "[" + std::to_string(i) + "]", "prompt"));
  }
  return tokens;
}

std::vector<std::string> stop_strings(const Json& stop) {
  if (!stop.is_string() && !stop.is_array()) {
    fail("'stop' must be a string or an array of strings", "stop");
  }
  std::vector<std::string> out;
  if (stop.is_string()) {
    out.push_back(stop.get<std::string>());
  } else {
    if (stop.size() > kMaxStopStrings) {
      fail("'stop' has " + std::to_string(stop.size()) + " strings; at most " +
               std::to_string(kMaxStopStrings) + " are allowed",
           "stop");
    }
    for (size_t i = 0; i < stop.size(); ++i) {
      if (!stop[i].is_string()) {
        fail("stop[" + std::to_string(i) + "] must be a string, got " + describe(stop[i]), "stop");
      }
      out.push_back(stop[i].get<std::string>());
    }
  }
  for (const std::string& s : out) {
    if (s.size() > kMaxStopStringBytes) {
      fail("a 'stop' string is " + std::to_string(s.size()) + " bytes; at most " +
               std::to_string(kMaxStopStringBytes) + " are allowed",
           "stop");
    }
  }
  std::erase(out, std::string());  // an empty stop string would match everywhere: ignored
  return out;
}

void refuse_completion_only_fields(const Json& body) {
  if (get_bool(body, "echo").value_or(false)) fail("'echo' is not supported", "echo");
  if (field(body, "logprobs")) fail("'logprobs' is not supported yet", "logprobs");
  if (field(body, "suffix")) fail("'suffix' is not supported", "suffix");
}

CompletionRequest parse(std::string_view text, const CompletionLimits& limits) {
  Json body = parse_body(text);
  check_model(body, limits.served_model_name);
  const Json* prompt = field(body, "prompt");
  if (!prompt) fail("'prompt' is required (text or an array of token ids)", "prompt");
  refuse_unsupported_sampling(body);
  refuse_completion_only_fields(body);
  CompletionRequest r;
  r.engine.prompt = prompt_tokens(body, *prompt, limits);
  parse_generation_fields(body, limits, /*chat=*/false, r);
  r.resume_token_ids = parse_resume_token_ids(body, limits, r.engine);
  return r;
}

}  // namespace

void refuse_unsupported_sampling(const Json& body) {
  for (const char* name : {"n", "best_of"}) {
    if (get_int(body, name, 1, INT32_MAX).value_or(1) != 1) {
      fail(std::string("only '") + name + "' = 1 is supported", name);
    }
  }
  for (const char* penalty : {"presence_penalty", "frequency_penalty"}) {
    if (get_number(body, penalty).value_or(0) != 0) {
      fail(std::string("'") + penalty + "' is not supported (only 0)", penalty);
    }
  }
  if (get_number(body, "repetition_penalty").value_or(1) != 1) {
    fail("'repetition_penalty' is not supported (only 1)", "repetition_penalty");
  }
  if (const Json* bias = field(body, "logit_bias"); bias && !(bias->is_object() && bias->empty())) {
    fail("'logit_bias' is not supported", "logit_bias");
  }
}

void parse_generation_fields(const Json& body, const CompletionLimits& limits, bool chat,
                             CompletionRequest& r) {
  EngineRequest& e = r.engine;
  int64_t prompt_len = static_cast<int64_t>(e.prompt.size());
  int64_t room = limits.max_model_len - prompt_len;
  if (room < 1) {
    fail("This model's maximum context length is " + std::to_string(limits.max_model_len) +
             " tokens, and the prompt alone has " + std::to_string(prompt_len) +
             ": shorten the prompt",
         chat ? "messages" : "prompt");
  }
  const char* max_name = "max_tokens";
  std::optional<int64_t> max_tokens;
  if (chat) {
    max_tokens = get_int(body, "max_completion_tokens", 1, INT32_MAX);
    if (max_tokens) max_name = "max_completion_tokens";
  }
  if (!max_tokens) max_tokens = get_int(body, "max_tokens", 1, INT32_MAX);
  if (max_tokens && prompt_len + *max_tokens > limits.max_model_len) {
    fail("This model's maximum context length is " + std::to_string(limits.max_model_len) +
             " tokens. However, you requested " + std::to_string(prompt_len + *max_tokens) +
             " tokens (" + std::to_string(prompt_len) + " in the prompt, " +
             std::to_string(*max_tokens) + " in the completion): reduce the prompt or " + max_name,
         max_name);
  }
  int64_t default_max = chat ? room : std::min<int64_t>(16, room);
  e.stop.max_tokens =
      static_cast<int>(std::min<int64_t>(max_tokens.value_or(default_max), INT32_MAX));
  e.stop.min_tokens =
      static_cast<int>(get_int(body, "min_tokens", 0, e.stop.max_tokens).value_or(0));
  e.stop.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
  if (const Json* ids = field(body, "stop_token_ids")) {
    if (!ids->is_array()) fail("'stop_token_ids' must be an array of token ids", "stop_token_ids");
    for (size_t i = 0; i < ids->size(); ++i) {
      e.stop.stop_token_ids.push_back(get_token_id((*ids)[i], limits.vocab_size,
                                                   "stop_token_ids[" + std::to_string(i) + "]",
                                                   "stop_token_ids"));
    }
  }
  if (const Json* stop = field(body, "stop")) {
    r.stop_strings = stop_strings(*stop);
    if (!r.stop_strings.empty()) require_tokenizer(limits, "'stop' strings", "stop");
  }
  r.skip_special_tokens = get_bool(body, "skip_special_tokens").value_or(true);

  double temperature = get_number(body, "temperature").value_or(1.0);
  if (temperature < 0 || temperature > 100)
    fail("'temperature' must be in [0, 100]", "temperature");
  e.temperature = static_cast<float>(temperature);
  double top_p = get_number(body, "top_p").value_or(1.0);
  if (!(top_p > 0 && top_p <= 1)) fail("'top_p' must be in (0, 1]", "top_p");
  e.top_p = static_cast<float>(top_p);
  int64_t top_k = get_int(body, "top_k", -1, INT32_MAX).value_or(0);
  e.top_k = top_k < 0 ? 0 : static_cast<int>(top_k);  // -1 (vLLM's "off") = 0 here
  if (const Json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) fail("'seed' must be an integer", "seed");
    e.seed = seed->is_number_unsigned() ? seed->get<uint64_t>()
                                        : static_cast<uint64_t>(seed->get<int64_t>());
  }

  r.stream = get_bool(body, "stream").value_or(false);
  if (const Json* options = field(body, "stream_options")) {
    if (!options->is_object()) fail("'stream_options' must be an object", "stream_options");
    if (!r.stream) fail("'stream_options' is only allowed when 'stream' is true", "stream_options");
    r.include_usage = get_bool(*options, "include_usage").value_or(false);
  }
}

std::variant<CompletionRequest, RequestError> parse_completion_request(
    std::string_view body, const CompletionLimits& limits) {
  return parse_request<CompletionRequest>([&] { return parse(body, limits); });
}

}  // namespace gpufrac::engine
