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

}  // namespace gpufrac::engine
