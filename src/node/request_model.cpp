#include "node/request_model.h"

#include "common/json.h"

namespace gpufrac {
namespace {

class Scanner {
 public:
  explicit Scanner(std::string_view text) : s_(text) {}

  size_t position() const { return i_; }
  bool at_end() const { return i_ >= s_.size(); }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void advance() { ++i_; }

  void skip_whitespace() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }

  // At '"': decodes the string into `out` (escapes, \u with surrogate pairs -> UTF-8).
  bool read_string(std::string* out) {
    if (peek() != '"') return false;
    ++i_;
    while (i_ < s_.size()) {
      char c = s_[i_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        if (out) *out += c;
        continue;
      }
      if (i_ >= s_.size()) return false;
      char e = s_[i_++];
      switch (e) {
        case '"': case '\\': case '/': if (out) *out += e; break;
        case 'b': if (out) *out += '\b'; break;
        case 'f': if (out) *out += '\f'; break;
        case 'n': if (out) *out += '\n'; break;
        case 'r': if (out) *out += '\r'; break;
        case 't': if (out) *out += '\t'; break;
        case 'u': {
          uint32_t code = 0;
          if (!hex4(&code)) return false;
          if (code >= 0xD800 && code <= 0xDBFF) {
            uint32_t low = 0;
            if (i_ + 1 >= s_.size() || s_[i_] != '\\' || s_[i_ + 1] != 'u') return false;
            i_ += 2;
            if (!hex4(&low) || low < 0xDC00 || low > 0xDFFF) return false;
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          }
          if (out) append_utf8(*out, code);
          break;
        }
        default: return false;
      }
    }
    return false;
  }

  // Skips one value of any kind. Containers are skipped by bracket counting (strings respected);
  // their inside is not validated.
  bool skip_value() {
    char c = peek();
    if (c == '"') return read_string(nullptr);
    if (c == '{' || c == '[') {
      int depth = 0;
      while (i_ < s_.size()) {
        char d = s_[i_];
        if (d == '"') {
          if (!read_string(nullptr)) return false;
          continue;
        }
        ++i_;
        if (d == '{' || d == '[') {
          ++depth;
        } else if (d == '}' || d == ']') {
          if (--depth == 0) return true;
        }
      }
      return false;
    }
    size_t start = i_;  // number, true, false, null
    while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != '}' && s_[i_] != ']' && s_[i_] != ' ' &&
           s_[i_] != '\n' && s_[i_] != '\t' && s_[i_] != '\r') {
      ++i_;
    }
    return i_ > start;
  }

 private:
  bool hex4(uint32_t* value) {
    if (i_ + 4 > s_.size()) return false;
    for (int k = 0; k < 4; ++k) {
      char h = s_[i_++];
      int digit = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (digit < 0) return false;
      *value = *value * 16 + uint32_t(digit);
    }
    return true;
  }
  static void append_utf8(std::string& out, uint32_t code) {
    if (code < 0x80) {
      out += char(code);
    } else if (code < 0x800) {
      out += char(0xC0 | (code >> 6));
      out += char(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += char(0xE0 | (code >> 12));
      out += char(0x80 | ((code >> 6) & 0x3F));
      out += char(0x80 | (code & 0x3F));
    } else {
      out += char(0xF0 | (code >> 18));
      out += char(0x80 | ((code >> 12) & 0x3F));
      out += char(0x80 | ((code >> 6) & 0x3F));
      out += char(0x80 | (code & 0x3F));
    }
  }

  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

std::optional<RequestModel> find_request_model(std::string_view body, RequestModelError* error) {
  auto fail = [&](RequestModelError e) {
    if (error) *error = e;
    return std::nullopt;
  };
  Scanner scan(body);
  scan.skip_whitespace();
  if (scan.peek() != '{') return fail(RequestModelError::kNotAnObject);
  scan.advance();
  scan.skip_whitespace();
  if (scan.peek() == '}') return fail(RequestModelError::kMissing);
  while (true) {
    scan.skip_whitespace();
    std::string key;
    if (!scan.read_string(&key)) return fail(RequestModelError::kNotAnObject);
    scan.skip_whitespace();
    if (scan.peek() != ':') return fail(RequestModelError::kNotAnObject);
    scan.advance();
    scan.skip_whitespace();
    if (key == "model") {
      if (scan.peek() != '"') return fail(RequestModelError::kNotAString);
      RequestModel model;
      model.begin = scan.position();
      if (!scan.read_string(&model.name)) return fail(RequestModelError::kNotAnObject);
      model.end = scan.position();
      if (error) *error = RequestModelError::kNone;
      return model;
    }
    if (!scan.skip_value()) return fail(RequestModelError::kNotAnObject);
    scan.skip_whitespace();
    if (scan.peek() == ',') {
      scan.advance();
      continue;
    }
    if (scan.peek() == '}') return fail(RequestModelError::kMissing);
    return fail(RequestModelError::kNotAnObject);
  }
}

std::string replace_request_model(std::string_view body, const RequestModel& model, std::string_view name) {
  std::string out;
  out.reserve(body.size() + name.size() + 8);
  out.append(body.substr(0, model.begin));
  out += Json(std::string(name)).dump();
  out.append(body.substr(model.end));
  return out;
}

}  // namespace gpufrac
