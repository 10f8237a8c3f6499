// ServedTokenizer: the text side of a served model — its tokenizer, its chat template and the ids
// that end an assistant turn — or, when the model has no tokenizer data, the reason and the fix,
// which the text endpoints answer with. `gpufrac serve` loads it once at start; the server and
// every request read it (immutable after load: thread-safe).
//
// Where the tokenizer comes from (load_served_tokenizer):
//   --tokenizer DIR      DIR/tokenizer.json (a missing file is a UsageError)
//   a preset             find_qwen3_tokenizer_dir(): the Qwen3 data scripts/install-deps fetches
//                        (the presets have Qwen3's vocabulary); not installed -> no tokenizer
//   a checkpoint DIR     DIR/tokenizer.json; absent -> no tokenizer
// The chat template is --chat-template NAME, else the kind tokenizer_config.json's template is.
// A tokenizer whose ids reach past the model's vocabulary is refused (UsageError): it is the
// wrong tokenizer for the model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"

namespace gpufrac::engine {

struct ServedTokenizer {
  std::optional<Tokenizer> tokenizer;
  std::optional<ChatTemplateKind> chat_template;
  std::vector<int32_t> chat_stop_ids;  // chat_stop_token_ids() of the template; empty without one
  std::string directory;               // where tokenizer.json was read
  std::string unavailable;             // without a tokenizer: why, and the fix

  const Tokenizer* get() const { return tokenizer ? &*tokenizer : nullptr; }
};

struct ServedTokenizerOptions {
  std::string model;  // --model: a preset name or a checkpoint directory
  bool model_is_preset = false;
  std::string tokenizer_dir;  // --tokenizer; empty = from the model
  std::string chat_template;  // --chat-template (qwen3, chatml, llama3); empty = detect
  int vocab_size = 0;         // the model's
};

// Throws UsageError for a bad --tokenizer/--chat-template (or $GPUFRAC_TOKENIZER_DIR) and
// RuntimeFailure for a tokenizer.json that cannot be loaded; "not installed" is not an error.
ServedTokenizer load_served_tokenizer(const ServedTokenizerOptions& options);

}  // namespace gpufrac::engine
