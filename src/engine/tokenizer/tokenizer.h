// A model's tokenizer, loaded from its Hugging Face tokenizer.json: byte-level BPE with the
// Qwen2/Qwen3 or Llama 3 pre-tokenizer, the NFC normalizer where the file has one, added tokens
// (<|im_start|>, <think>, ...) matched in the text before anything else, and the post-processor's
// fixed prefix/suffix ids (Llama 3.1's <|begin_of_text|>; none for Qwen). What the loader does not
// implement it refuses with a RuntimeFailure naming the field (see docs/tokenizer.md).
//
// Text is UTF-8; encode never fails: bytes that are not valid UTF-8 are encoded byte for byte, so
// the token_bytes of encode(x) always concatenate to x (to NFC(x) under the NFC normalizer), and
// decode(encode(x)) == x for valid UTF-8 x in NFC. decode skips ids the tokenizer does not know (a
// model's embedding table is often larger than its vocabulary) and replaces ill-formed UTF-8 with
// U+FFFD.
//
// Thread-safety: immutable after load; every method may be called from many threads at once (the
// word cache inside is locked). Loading Qwen3's 11 MB tokenizer.json takes about 0.3 s of CPU
// (docs/tokenizer.md).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "engine/tokenizer/pre_tokenizer.h"

namespace gpufrac::engine {

class BpeModel;
struct TokenizerJsonParts;

struct EncodeOptions {
  // Match added tokens in the text (what Hugging Face does). false: their text is encoded as
  // ordinary characters, e.g. for user content that must not inject control tokens.
  bool parse_special = true;
  // Put the post-processor's prefix/suffix ids around the result (HF's add_special_tokens).
  bool add_special_tokens = false;
};

class Tokenizer {
 public:
  // `path`: a directory holding tokenizer.json, or the file itself.
  static Tokenizer load(const std::string& path);
  // `source` names the data in error messages.
  static Tokenizer from_json(const Json& tokenizer_json, const std::string& source);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const;
  // Appends to `ids` (for building a prompt from parts without copying).
  void encode_into(std::string_view text, const EncodeOptions& options,
                   std::vector<int32_t>& ids) const;

  // Text of `ids`; special tokens (added tokens marked "special") are left out when
  // skip_special_tokens. Ill-formed UTF-8 becomes U+FFFD.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = true) const;
  // The raw bytes of one token (possibly part of a UTF-8 character); empty for unknown ids and,
  // with skip_special_tokens, for special tokens.
  std::string_view token_bytes(int32_t id, bool skip_special_tokens) const;
  // The token as tokenizer.json spells it ("Ġhello", "<|im_end|>"); empty for unknown ids.
  std::string token_string(int32_t id) const;
  // The id of an added token's content or of a vocabulary spelling; nullopt when unknown.
  std::optional<int32_t> token_id(std::string_view token) const;

  bool is_special(int32_t id) const;
  // One past the largest id; ids below it may still be unknown (gaps).
  int32_t id_limit() const { return int32_t(tokens_.size()); }
  PreTokenizerPattern pre_tokenizer() const { return pattern_; }
  bool normalizes_nfc() const { return nfc_; }
  const std::vector<int32_t>& prefix_ids() const { return prefix_ids_; }
  const std::vector<int32_t>& suffix_ids() const { return suffix_ids_; }

 private:
  struct TokenInfo {
    std::string bytes;  // raw bytes (vocabulary) or content (added token)
    bool known = false;
    bool added = false;
    bool special = false;
  };

  Tokenizer();
  static Tokenizer from_parts(TokenizerJsonParts parts, const std::string& source);
  void encode_plain(std::string_view text, std::vector<int32_t>& ids) const;
  // The first position >= pos where an added token may start (text.size() when none).
  size_t next_added_start(std::string_view text, size_t pos) const;
  // The length of the longest added token at text[pos...], with its id; 0 when none.
  // The trie node reached from `node` by `byte`, or -1.
  int32_t child_of(int32_t node, unsigned char byte) const;
  size_t match_added(std::string_view text, size_t pos, int32_t& id) const;
  // Adds an added token's content to the trie; of two with the same content the first stays.
  void add_to_trie(std::string_view content, int32_t id);

  std::unique_ptr<BpeModel> bpe_;
  std::vector<TokenInfo> tokens_;
  PreTokenizerPattern pattern_ = PreTokenizerPattern::kQwen2;
  bool nfc_ = false;
  std::vector<int32_t> prefix_ids_, suffix_ids_;
  // Added tokens' contents as a byte trie (node 0 is the root) for leftmost-longest matching:
  // Llama 3 has 256 added tokens starting with "<|", which a list per first byte compared one by
  // one at every '<' of the text.
  struct TrieNode {
    int32_t id = -1;  // the added token whose content ends here, or -1
    std::vector<std::pair<unsigned char, int32_t>> children;  // byte, node index
  };
  std::vector<TrieNode> added_trie_;
  std::array<bool, 256> starts_added_{};  // some added token starts with this byte
};

}  // namespace gpufrac::engine
