// Tokenizer::load and from_json: reads tokenizer.json and refuses, with the field named, anything
// this implementation would get wrong.
#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "common/error.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_json_reader.h"

namespace gpufrac::engine {
namespace {

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw RuntimeFailure(source + ": " + what);
}

bool is_null_or_empty_string(const Json& j, const char* key) {
  return !j.contains(key) || j[key].is_null() ||
         (j[key].is_string() && j[key].get<std::string>().empty());
}

// The normalizer: none, or NFC (alone or as the only member of a Sequence).
bool read_normalizer(const Json& j, const std::string& source) {
  if (!j.contains("normalizer") || j["normalizer"].is_null()) return false;
  const Json& n = j["normalizer"];
  const std::string type = n.value("type", "");
  if (type == "NFC") return true;
  if (type == "Sequence" && n.contains("normalizers") && n["normalizers"].size() == 1 &&
      n["normalizers"][0].value("type", "") == "NFC") {
    return true;
  }
  fail(source, "normalizer " + n.dump() + " is not supported (only NFC or none)");
}

// The pre-tokenizer: Sequence[Split(<known regex>, Isolated), ByteLevel(no prefix space, no
// regex)].
PreTokenizerPattern read_pre_tokenizer(const Json& j, const std::string& source) {
  const std::string supported =
      " is not supported (expected a Sequence of a Split with the Qwen2 or Llama 3 regex, "
      "behavior Isolated, and ByteLevel with use_regex false)";
  if (!j.contains("pre_tokenizer") || !j["pre_tokenizer"].is_object()) {
    fail(source, "pre_tokenizer (missing)" + supported);
  }
  const Json& p = j["pre_tokenizer"];
  const std::string dump = p.dump();
  if (p.value("type", "") != "Sequence" || !p.contains("pretokenizers") ||
      p["pretokenizers"].size() != 2) {
    fail(source, "pre_tokenizer " + dump.substr(0, 200) + supported);
  }
  const Json& split = p["pretokenizers"][0];
  const Json& byte_level = p["pretokenizers"][1];
  if (split.value("type", "") != "Split" || split.value("behavior", "") != "Isolated" ||
      split.value("invert", false) || !split.contains("pattern") ||
      !split["pattern"].contains("Regex")) {
    fail(source, "pre_tokenizer " + dump.substr(0, 200) + supported);
  }
  if (byte_level.value("type", "") != "ByteLevel" || byte_level.value("add_prefix_space", false) ||
      byte_level.value("use_regex", true)) {
    fail(source, "pre_tokenizer " + dump.substr(0, 200) + supported);
  }
  const std::string regex = split["pattern"]["Regex"].get<std::string>();
  const auto pattern = pre_tokenizer_pattern_from_regex(regex);
  if (!pattern) fail(source, "pre_tokenizer Split regex " + regex + supported);
  return *pattern;
}

// A TemplateProcessing's "single" template: special-token ids before and after the sequence.
void read_template_processing(const Json& t, const std::string& source,
                              std::vector<int32_t>& prefix, std::vector<int32_t>& suffix) {
  bool after_sequence = false;
  for (const Json& item : t.at("single")) {
    if (item.contains("Sequence")) {
      if (item["Sequence"].value("id", "") != "A") fail(source, "post_processor: single uses B");
      after_sequence = true;
      continue;
    }
    const std::string name = item.at("SpecialToken").at("id").get<std::string>();
    const Json& special = t.at("special_tokens").at(name);
    for (const Json& id : special.at("ids")) {
      (after_sequence ? suffix : prefix).push_back(id.get<int32_t>());
    }
  }
}

void read_post_processor(const Json& p, const std::string& source, std::vector<int32_t>& prefix,
                         std::vector<int32_t>& suffix) {
  if (p.is_null()) return;
  const std::string type = p.value("type", "");
  if (type == "ByteLevel") return;  // offsets only
  if (type == "TemplateProcessing") {
    read_template_processing(p, source, prefix, suffix);
    return;
  }
  if (type == "Sequence") {
    for (const Json& member : p.at("processors"))
      read_post_processor(member, source, prefix, suffix);
    return;
  }
  fail(source, "post_processor type " + type +
                   " is not supported (ByteLevel, TemplateProcessing or a Sequence of them)");
}

std::string token_bytes_or_fail(const std::string& token, const std::string& source) {
  auto bytes = byte_level_to_bytes(token);
  if (!bytes) fail(source, "vocabulary token '" + token + "' is not in the ByteLevel alphabet");
  return std::move(*bytes);
}

}  // namespace

Tokenizer Tokenizer::load(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path file = fs::is_directory(path) ? fs::path(path) / "tokenizer.json" : fs::path(path);
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw RuntimeFailure("cannot read " + file.string() +
                         " (give a model directory holding tokenizer.json, or the file)");
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return from_parts(read_tokenizer_json(buffer.str(), file.string()), file.string());
}

Tokenizer Tokenizer::from_json(const Json& j, const std::string& source) {
  return from_parts(split_tokenizer_json(j, source), source);
}

Tokenizer Tokenizer::from_parts(TokenizerJsonParts parts, const std::string& source) {
  Tokenizer t;
  const Json& j = parts.rest;
  try {
    const Json& model = j.at("model");
    if (model.value("type", "BPE") != "BPE") fail(source, "model.type must be BPE");
    if (model.value("byte_fallback", false)) fail(source, "model.byte_fallback is not supported");
    if (model.contains("dropout") && !model["dropout"].is_null()) {
      fail(source, "model.dropout is not supported");
    }
    if (!is_null_or_empty_string(model, "continuing_subword_prefix") ||
        !is_null_or_empty_string(model, "end_of_word_suffix")) {
      fail(source, "model.continuing_subword_prefix/end_of_word_suffix are not supported");
    }
    t.nfc_ = read_normalizer(j, source);
    t.pattern_ = read_pre_tokenizer(j, source);
    if (j.contains("post_processor")) {
      read_post_processor(j["post_processor"], source, t.prefix_ids_, t.suffix_ids_);
    }
    if (j.contains("decoder") && !j["decoder"].is_null() &&
        j["decoder"].value("type", "") != "ByteLevel") {
      fail(source, "decoder must be ByteLevel");
    }

    BytesToId vocab;
    vocab.reserve(parts.vocab.size());
    int64_t max_id = -1;
    for (const auto& [token, id] : parts.vocab) {
      if (id < 0 || id > INT32_MAX)
        fail(source, "model.vocab has an invalid id for '" + token + "'");
      max_id = std::max(max_id, id);
      vocab.emplace(token_bytes_or_fail(token, source), int32_t(id));
    }
    const Json added = j.value("added_tokens", Json::array());
    for (const Json& a : added) max_id = std::max<int64_t>(max_id, a.at("id").get<int32_t>());
    t.tokens_.resize(size_t(max_id) + 1);
    for (const auto& [bytes, id] : vocab) t.tokens_[id] = TokenInfo{bytes, true, false, false};

    std::vector<BpeMerge> merges;
    merges.reserve(parts.merges.size());
    std::string merged_bytes;
    for (const auto& [left, right] : parts.merges) {
      const std::string left_bytes = token_bytes_or_fail(left, source);
      const std::string right_bytes = token_bytes_or_fail(right, source);
      merged_bytes = left_bytes + right_bytes;
      auto l = vocab.find(left_bytes), r = vocab.find(right_bytes), m = vocab.find(merged_bytes);
      if (l == vocab.end() || r == vocab.end() || m == vocab.end()) {
        fail(source, "merge '" + left + " " + right + "' uses a token missing from model.vocab");
      }
      merges.push_back(BpeMerge{l->second, r->second, m->second});
    }

    t.added_trie_.resize(1);  // the root
    for (const Json& a : added) {
      const std::string content = a.at("content").get<std::string>();
      const int32_t id = a.at("id").get<int32_t>();
      if (content.empty() || id < 0)
        fail(source, "added token " + std::to_string(id) + " is invalid");
      if (a.value("lstrip", false) || a.value("rstrip", false) || a.value("single_word", false)) {
        fail(source,
             "added token '" + content + "' uses lstrip/rstrip/single_word (not supported)");
      }
      if (t.nfc_ && a.value("normalized", false)) {
        fail(source, "added token '" + content + "' is normalized (not supported with NFC)");
      }
      t.tokens_[id] = TokenInfo{content, true, true, a.value("special", false)};
      t.add_to_trie(content, id);
      t.starts_added_[static_cast<unsigned char>(content[0])] = true;
    }
    t.bpe_ =
        std::make_unique<BpeModel>(std::move(vocab), merges, model.value("ignore_merges", false));
  } catch (const Json::exception& e) {
    fail(source, std::string("unexpected tokenizer.json layout: ") + e.what());
  } catch (const std::invalid_argument& e) {
    fail(source, e.what());
  }
  return t;
}

}  // namespace gpufrac::engine
