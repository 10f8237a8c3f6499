#include "engine/tokenizer/tokenizer_json_reader.h"

#include "common/error.h"

namespace gpufrac::engine {
namespace {

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw RuntimeFailure(source + ": " + what);
}

// "a b" -> (a, b); false when there is no space.
bool split_merge(const std::string& merge, std::pair<std::string, std::string>& out) {
  const size_t space = merge.find(' ');
  if (space == std::string::npos) return false;
  out = {merge.substr(0, space), merge.substr(space + 1)};
  return true;
}

// SAX events -> parts: model.vocab and model.merges into the lists, everything else into a tree.
class PartsReader {
 public:
  explicit PartsReader(TokenizerJsonParts& parts) : parts_(parts) {}

  bool null() { return value(Json(nullptr)); }
  bool boolean(bool v) { return value(Json(v)); }
  bool number_integer(int64_t v) { return mode_ == Mode::kVocab ? vocab_entry(v) : value(Json(v)); }
  bool number_unsigned(uint64_t v) {
    return mode_ == Mode::kVocab ? vocab_entry(int64_t(v)) : value(Json(v));
  }
  bool number_float(double v, const std::string&) {
    return mode_ == Mode::kNone ? value(Json(v)) : fail_with("model.vocab ids must be integers");
  }
  bool binary(Json::binary_t&) { return fail_with("binary values are not expected"); }

  bool string(std::string& s) {
    if (mode_ == Mode::kNone) return value(Json(std::move(s)));
    if (mode_ != Mode::kMerges) return fail_with("model.vocab ids must be integers");
    if (merge_depth_ == 1) {
      std::pair<std::string, std::string> merge;
      if (!split_merge(s, merge)) return fail_with("merge '" + s + "' is not 'left right'");
      parts_.merges.push_back(std::move(merge));
    } else {
      pair_.push_back(std::move(s));
    }
    return true;
  }

  bool key(std::string& k) {
    pending_key_ = std::move(k);
    return true;
  }

  bool start_object(size_t) {
    if (mode_ != Mode::kNone) return fail_with("unexpected object in model.vocab or model.merges");
    if (in_model() && pending_key_ == "vocab") {
      mode_ = Mode::kVocab;
      saw_vocab_ = true;
      return true;
    }
    return open(Json::object());
  }

  bool end_object() {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kNone;
      return true;
    }
    frames_.pop_back();
    return true;
  }

  bool start_array(size_t) {
    if (mode_ == Mode::kMerges) {
      if (merge_depth_ != 1) return fail_with("model.merges nests too deeply");
      merge_depth_ = 2;
      pair_.clear();
      return true;
    }
    if (mode_ != Mode::kNone) return fail_with("unexpected array in model.vocab");
    if (in_model() && pending_key_ == "merges") {
      mode_ = Mode::kMerges;
      merge_depth_ = 1;
      saw_merges_ = true;
      return true;
    }
    return open(Json::array());
  }

  bool end_array() {
    if (mode_ == Mode::kMerges) {
      if (merge_depth_ == 1) {
        mode_ = Mode::kNone;
        return true;
      }
      if (pair_.size() != 2) return fail_with("a merge given as an array must have two strings");
      parts_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      merge_depth_ = 1;
      return true;
    }
    frames_.pop_back();
    return true;
  }

  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception& e) {
    return fail_with("not valid JSON at byte " + std::to_string(position) + " (" + e.what() + ")");
  }

  const std::string& error() const { return error_; }
  bool saw_vocab() const { return saw_vocab_; }
  bool saw_merges() const { return saw_merges_; }

 private:
  enum class Mode { kNone, kVocab, kMerges };
  struct Frame {
    Json* json;
    std::string name;  // key in the parent object ("" for the root and array elements)
  };

  bool in_model() const { return frames_.size() == 2 && frames_[1].name == "model"; }

  bool fail_with(std::string message) {
    error_ = std::move(message);
    return false;
  }

  bool vocab_entry(int64_t id) {
    parts_.vocab.emplace_back(std::move(pending_key_), id);
    return true;
  }

  // Adds a scalar to the open container (or makes it the root).
  bool value(Json v) {
    if (frames_.empty()) {
      parts_.rest = std::move(v);
      return true;
    }
    Json& parent = *frames_.back().json;
    if (parent.is_array()) {
      parent.push_back(std::move(v));
    } else {
      parent[pending_key_] = std::move(v);
    }
    return true;
  }

  // Adds a container and makes it the open one. Pointers on the stack stay valid: a container
  // only gains children while it is on top of the stack.
  bool open(Json empty) {
    if (frames_.empty()) {
      parts_.rest = std::move(empty);
      frames_.push_back({&parts_.rest, ""});
      return true;
    }
    Json& parent = *frames_.back().json;
    if (parent.is_array()) {
      parent.push_back(std::move(empty));
      frames_.push_back({&parent.back(), ""});
    } else {
      Json& child = parent[pending_key_];
      child = std::move(empty);
      frames_.push_back({&child, pending_key_});
    }
    return true;
  }

  TokenizerJsonParts& parts_;
  std::vector<Frame> frames_;
  std::string pending_key_;
  std::vector<std::string> pair_;
  Mode mode_ = Mode::kNone;
  int merge_depth_ = 0;
  bool saw_vocab_ = false, saw_merges_ = false;
  std::string error_;
};

}  // namespace

TokenizerJsonParts read_tokenizer_json(const std::string& text, const std::string& source) {
  TokenizerJsonParts parts;
  PartsReader reader(parts);
  if (!Json::sax_parse(text, &reader)) fail(source, reader.error());
  if (!reader.saw_vocab() || !reader.saw_merges())
    fail(source, "model.vocab or model.merges is missing");
  return parts;
}

TokenizerJsonParts split_tokenizer_json(const Json& j, const std::string& source) {
  TokenizerJsonParts parts;
  if (!j.is_object() || !j.contains("model") || !j["model"].contains("vocab") ||
      !j["model"].contains("merges")) {
    fail(source, "model.vocab or model.merges is missing");
  }
  parts.rest = j;
  parts.rest["model"].erase("vocab");
  parts.rest["model"].erase("merges");
  for (const auto& [token, id] : j["model"]["vocab"].items()) {
    if (!id.is_number_integer()) fail(source, "model.vocab ids must be integers");
    parts.vocab.emplace_back(token, id.get<int64_t>());
  }
  for (const Json& m : j["model"]["merges"]) {
    std::pair<std::string, std::string> merge;
    if (m.is_string()) {
      if (!split_merge(m.get<std::string>(), merge)) {
        fail(source, "merge '" + m.get<std::string>() + "' is not 'left right'");
      }
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merge = {m[0].get<std::string>(), m[1].get<std::string>()};
    } else {
      fail(source, "a merge given as an array must have two strings");
    }
    parts.merges.push_back(std::move(merge));
  }
  return parts;
}

}  // namespace gpufrac::engine
