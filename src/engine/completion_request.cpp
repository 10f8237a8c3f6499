#include "engine/completion_request.h"

#include <cstdint>
#include <limits>
#include <optional>

#include "common/json.h"

namespace gpufrac::engine {

namespace {

// Thrown inside this file only; parse_completion_request turns it into its result.
struct Invalid {
  RequestError error;
};

[[noreturn]] void fail(std::string message, std::string param, int status = 400) {
  throw Invalid{{status, std::move(message), std::move(param)}};
}

// A value for an error message: scalars as JSON (cut short), containers by type name only
// (dumping a deeply nested array would recurse without bound).
std::string describe(const Json& v) {
  if (v.is_structured()) return v.is_array() ? "an array" : "an object";
  std::string text = v.dump();
  if (text.size() > 40) text = text.substr(0, 40) + "...";
  return text;
}

const Json* field(const Json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

// An integer in [min, max], or nullopt when absent or null.
std::optional<int64_t> get_int(const Json& body, const char* name, int64_t min, int64_t max) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) fail(std::string("'") + name + "' must be an integer", name);
  bool too_big = v->is_number_unsigned() &&
                 v->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max());
  int64_t x = too_big ? std::numeric_limits<int64_t>::max() : v->get<int64_t>();
  if (too_big || x < min || x > max) {
    fail(std::string("'") + name + "' must be between " + std::to_string(min) + " and " +
             std::to_string(max) + ", got " + describe(*v),
         name);
  }
  return x;
}

std::optional<double> get_number(const Json& body, const char* name) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) fail(std::string("'") + name + "' must be a number", name);
  return v->get<double>();
}

std::optional<bool> get_bool(const Json& body, const char* name) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) fail(std::string("'") + name + "' must be true or false", name);
  return v->get<bool>();
}

std::string tokenizer_missing(std::string_view what) {
  return std::string(what) +
         " need the tokenizer, which this engine does not have yet: send the prompt as an array "
         "of token ids (and stop_token_ids instead of stop strings)";
}

int32_t token_id(const Json& v, const CompletionLimits& limits, const std::string& where,
                 const char* param) {
  if (!v.is_number_integer()) fail(where + " must be an integer token id, got " + describe(v), param);
  bool negative = v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0;
  if (negative || v.get<uint64_t>() >= uint64_t(limits.vocab_size)) {
    fail(where + " = " + describe(v) + " is outside the vocabulary [0, " +
             std::to_string(limits.vocab_size) + ")",
         param);
  }
  return static_cast<int32_t>(v.get<int64_t>());
}

// The one place a prompt becomes token ids. Text prompts (a string, or strings in the array)
// are where the tokenizer plugs in.
std::vector<int32_t> prompt_tokens(const Json& prompt, const CompletionLimits& limits) {
  if (prompt.is_string()) fail(tokenizer_missing("text prompts"), "prompt");
  if (!prompt.is_array()) fail("'prompt' must be an array of token ids", "prompt");
  if (prompt.empty()) fail("'prompt' is empty", "prompt");
  const Json* ids = &prompt;
  std::string where = "prompt";
  if (prompt[0].is_array() || prompt[0].is_string()) {
    if (prompt.size() != 1) {
      fail("batched prompts are not supported: send one prompt per request", "prompt");
    }
    if (prompt[0].is_string()) fail(tokenizer_missing("text prompts"), "prompt");
    ids = &prompt[0];
    where = "prompt[0]";
    if (ids->empty()) fail("'prompt' is empty", "prompt");
  }
  std::vector<int32_t> tokens;
  tokens.reserve(ids->size());
  for (size_t i = 0; i < ids->size(); ++i) {
    tokens.push_back(token_id((*ids)[i], limits, where + "[" + std::to_string(i) + "]", "prompt"));
  }
  return tokens;
}

// Fields that would change the output in ways this engine does not implement: refused unless
// they hold their neutral value.
void refuse_unsupported(const Json& body) {
  for (const char* name : {"n", "best_of"}) {
    if (get_int(body, name, 1, INT32_MAX).value_or(1) != 1) {
      fail(std::string("only '") + name + "' = 1 is supported", name);
    }
  }
  if (get_bool(body, "echo").value_or(false)) fail("'echo' is not supported", "echo");
  if (field(body, "logprobs")) fail("'logprobs' is not supported yet", "logprobs");
  if (field(body, "suffix")) fail("'suffix' is not supported", "suffix");
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

CompletionRequest parse(std::string_view text, const CompletionLimits& limits) {
  Json body = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) fail("the body is not valid JSON", "");
  if (!body.is_object()) fail("the body must be a JSON object", "");

  if (const Json* model = field(body, "model")) {
    if (!model->is_string()) fail("'model' must be a string", "model");
    if (model->get<std::string>() != limits.served_model_name) {
      fail("The model '" + model->get<std::string>() + "' does not exist; this server serves '" +
               limits.served_model_name + "'",
           "model", 404);
    }
  }
  const Json* prompt = field(body, "prompt");
  if (!prompt) fail("'prompt' is required (an array of token ids)", "prompt");
  refuse_unsupported(body);

  CompletionRequest r;
  EngineRequest& e = r.engine;
  e.prompt = prompt_tokens(*prompt, limits);
  int64_t prompt_len = static_cast<int64_t>(e.prompt.size());
  int64_t room = limits.max_model_len - prompt_len;
  if (room < 1) {
    fail("This model's maximum context length is " + std::to_string(limits.max_model_len) +
             " tokens, and the prompt alone has " + std::to_string(prompt_len) +
             ": shorten the prompt",
         "prompt");
  }
  std::optional<int64_t> max_tokens = get_int(body, "max_tokens", 1, INT32_MAX);
  if (max_tokens && prompt_len + *max_tokens > limits.max_model_len) {
    fail("This model's maximum context length is " + std::to_string(limits.max_model_len) +
             " tokens. However, you requested " + std::to_string(prompt_len + *max_tokens) +
             " tokens (" + std::to_string(prompt_len) + " in the prompt, " +
             std::to_string(*max_tokens) + " in the completion): reduce the prompt or max_tokens",
         "max_tokens");
  }
  e.stop.max_tokens = static_cast<int>(max_tokens.value_or(std::min<int64_t>(16, room)));
  e.stop.min_tokens = static_cast<int>(get_int(body, "min_tokens", 0, e.stop.max_tokens).value_or(0));
  e.stop.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
  if (const Json* ids = field(body, "stop_token_ids")) {
    if (!ids->is_array()) fail("'stop_token_ids' must be an array of token ids", "stop_token_ids");
    for (size_t i = 0; i < ids->size(); ++i) {
      e.stop.stop_token_ids.push_back(token_id(
          (*ids)[i], limits, "stop_token_ids[" + std::to_string(i) + "]", "stop_token_ids"));
    }
  }
  if (const Json* stop = field(body, "stop")) {
    bool empty = (stop->is_string() && stop->get<std::string>().empty()) ||
                 (stop->is_array() && stop->empty());
    if (!stop->is_string() && !stop->is_array()) {
      fail("'stop' must be a string or an array of strings", "stop");
    }
    if (!empty) fail(tokenizer_missing("'stop' strings"), "stop");
  }

  double temperature = get_number(body, "temperature").value_or(1.0);
  if (temperature < 0 || temperature > 100) fail("'temperature' must be in [0, 100]", "temperature");
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
  return r;
}

}  // namespace

std::variant<CompletionRequest, RequestError> parse_completion_request(
    std::string_view body, const CompletionLimits& limits) {
  try {
    return parse(body, limits);
  } catch (const Invalid& invalid) {
    return invalid.error;
  } catch (const std::exception& e) {
    return RequestError{400, std::string("invalid request: ") + e.what(), ""};
  }
}

}  // namespace gpufrac::engine
