#include "engine/api/served_tokenizer.h"

#include <filesystem>

#include "common/error.h"
#include "engine/tokenizer/tokenizer_location.h"

namespace gpufrac::engine {

namespace {

bool has_tokenizer_json(const std::string& dir) {
  std::error_code ignored;
  return std::filesystem::is_regular_file(std::filesystem::path(dir) / "tokenizer.json", ignored);
}

// The directory to load from, or empty with `served.unavailable` set.
std::string tokenizer_dir(const ServedTokenizerOptions& options, ServedTokenizer& served) {
  if (!options.tokenizer_dir.empty()) {
    if (!has_tokenizer_json(options.tokenizer_dir)) {
      throw UsageError(
          "--tokenizer " + options.tokenizer_dir +
          ": no tokenizer.json there (give the directory of a Hugging Face tokenizer)");
    }
    return options.tokenizer_dir;
  }
  if (options.model_is_preset) {
    try {
      return find_qwen3_tokenizer_dir();
    } catch (const RuntimeFailure& e) {
      served.unavailable = std::string("the Qwen3 tokenizer the '") + options.model +
                           "' preset uses is not installed (" + e.what() + ")";
      return {};
    }
  }
  if (has_tokenizer_json(options.model)) return options.model;
  served.unavailable = "the checkpoint directory " + options.model +
                       " has no tokenizer.json: copy the model's tokenizer.json and "
                       "tokenizer_config.json there, or start gpufrac serve with --tokenizer DIR";
  return {};
}

}  // namespace

ServedTokenizer load_served_tokenizer(const ServedTokenizerOptions& options) {
  ServedTokenizer served;
  std::optional<ChatTemplateKind> named;
  if (!options.chat_template.empty()) {
    named = chat_template_from_name(options.chat_template);
    if (!named) {
      throw UsageError("--chat-template " + options.chat_template +
                       ": unknown template (use qwen3, chatml or llama3)");
    }
  }
  const std::string dir = tokenizer_dir(options, served);
  if (dir.empty()) return served;
  served.tokenizer.emplace(Tokenizer::load(dir));
  served.directory = dir;
  if (served.tokenizer->id_limit() > options.vocab_size) {
    throw UsageError("the tokenizer in " + dir + " has ids up to " +
                     std::to_string(served.tokenizer->id_limit() - 1) +
                     ", past the model's vocabulary (" + std::to_string(options.vocab_size) +
                     "): it is not this model's tokenizer (pass the right one with --tokenizer)");
  }
  served.chat_template = named ? named : read_chat_template_kind(dir);
  if (served.chat_template) {
    served.chat_stop_ids = chat_stop_token_ids(*served.chat_template, *served.tokenizer);
  }
  return served;
}

}  // namespace gpufrac::engine
