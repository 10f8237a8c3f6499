#include "engine/api/request_fields.h"

#include <limits>

namespace gpufrac::engine {

void fail(std::string message, std::string param, int status) {
  throw RequestInvalid{{status, std::move(message), std::move(param)}};
}

std::string describe(const Json& value) {
  if (value.is_structured()) return value.is_array() ? "an array" : "an object";
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 40) {
    size_t cut = 40;  // on a character boundary: the message must stay valid UTF-8
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    text = text.substr(0, cut) + "...";
  }
  return text;
}

Json parse_body(std::string_view text) {
  Json body = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) fail("the body is not valid JSON", "");
  if (!body.is_object()) fail("the body must be a JSON object", "");
  return body;
}

const Json* field(const Json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<int64_t> get_int(const Json& body, const char* name, int64_t min, int64_t max) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) fail(std::string("'") + name + "' must be an integer", name);
  bool too_big =
      v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max());
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

const Json* get_object(const Json& body, const char* name) {
  const Json* v = field(body, name);
  if (v && !v->is_object()) fail(std::string("'") + name + "' must be an object", name);
  return v;
}

std::vector<std::string> get_strings(const Json& body, const char* name, size_t max_count,
                                     size_t max_bytes) {
  const Json* v = field(body, name);
  if (!v) return {};
  const std::string quoted = std::string("'") + name + "'";
  if (!v->is_string() && !v->is_array()) {
    fail(quoted + " must be a string or an array of strings", name);
  }
  std::vector<std::string> out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else {
    if (v->size() > max_count) {
      fail(quoted + " has " + std::to_string(v->size()) + " strings; at most " +
               std::to_string(max_count) + " are allowed",
           name);
    }
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) {
        fail(std::string(name) + "[" + std::to_string(i) + "] must be a string, got " +
                 describe((*v)[i]),
             name);
      }
      out.push_back((*v)[i].get<std::string>());
    }
  }
  for (const std::string& s : out) {
    if (s.size() > max_bytes) {
      fail("a " + quoted + " string is " + std::to_string(s.size()) + " bytes; at most " +
               std::to_string(max_bytes) + " are allowed",
           name);
    }
  }
  return out;
}

void check_model(const Json& body, const std::string& served_model_name) {
  const Json* model = field(body, "model");
  if (!model) return;
  if (!model->is_string()) fail("'model' must be a string", "model");
  if (model->get<std::string>() != served_model_name) {
    fail("The model '" + model->get<std::string>() + "' does not exist; this server serves '" +
             served_model_name + "'",
         "model", 404);
  }
}

int32_t get_token_id(const Json& value, int vocab_size, const std::string& where,
                     const char* param) {
  if (!value.is_number_integer()) {
    fail(where + " must be an integer token id, got " + describe(value), param);
  }
  bool negative = !value.is_number_unsigned() && value.get<int64_t>() < 0;
  if (negative || value.get<uint64_t>() >= uint64_t(vocab_size)) {
    fail(where + " = " + describe(value) + " is outside the vocabulary [0, " +
             std::to_string(vocab_size) + ")",
         param);
  }
  return static_cast<int32_t>(value.get<int64_t>());
}

std::vector<int32_t> get_token_ids(const Json& array, int vocab_size, const std::string& where,
                                   const char* param) {
  std::vector<int32_t> ids;
  ids.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    ids.push_back(get_token_id(array[i], vocab_size, where + "[" + std::to_string(i) + "]", param));
  }
  return ids;
}

const Tokenizer& require_tokenizer(const RequestLimits& limits, const std::string& what,
                                   const std::string& param) {
  if (limits.tokenizer && limits.tokenizer->get()) return *limits.tokenizer->get();
  std::string why = limits.tokenizer && !limits.tokenizer->unavailable.empty()
                        ? limits.tokenizer->unavailable
                        : "the server was started without one";
  fail(what + " need the model's tokenizer, and this server has none: " + why +
           ". Run scripts/install-deps (it fetches the Qwen3 tokenizer) or give gpufrac serve "
           "--tokenizer DIR, and restart; token-id prompts work without it",
       param);
}

void check_encoded_ids(const std::vector<int32_t>& ids, const RequestLimits& limits,
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

}  // namespace gpufrac::engine
