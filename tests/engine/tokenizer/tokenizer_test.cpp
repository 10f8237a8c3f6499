// Unit tests of Tokenizer: BPE merge order on small synthetic tokenizer.json files, added tokens,
// the loader's refusals, and fixed facts of the real Qwen3 and Llama 3 tokenizers (npm data).
#include "engine/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <random>
#include <thread>

#include "common/error.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/nfc.h"
#include "engine/tokenizer/tokenizer_json_reader.h"
#include "engine/tokenizer/utf8.h"
#include "engine/tokenizer/word_cache.h"
#include "tokenizer_test_support.h"

namespace gpufrac::engine {
namespace {

using test_util::synthetic_tokenizer_json;
using Ids = std::vector<int32_t>;

Tokenizer synthetic(const std::vector<std::pair<std::string, std::string>>& merges) {
  return Tokenizer::from_json(synthetic_tokenizer_json(merges), "synthetic");
}

int32_t id_of(const Tokenizer& t, std::string_view bytes) {
  return t.token_id(bytes_to_byte_level(bytes)).value_or(-1);
}

TEST(Bpe, MergesLowestRankFirst) {
  const Tokenizer t = synthetic({{"a", "b"}, {"b", "c"}, {"ab", "c"}});
  EXPECT_EQ(t.encode("abc"), Ids{id_of(t, "abc")});
  const Tokenizer reversed = synthetic({{"b", "c"}, {"a", "b"}, {"ab", "c"}});
  EXPECT_EQ(reversed.encode("abc"), (Ids{'a', id_of(reversed, "bc")}));
}

TEST(Bpe, TiesGoToTheLeftmostPair) {
  const Tokenizer t = synthetic({{"a", "a"}});
  const int32_t aa = id_of(t, "aa");
  EXPECT_EQ(t.encode("aaa"), (Ids{aa, 'a'}));
  EXPECT_EQ(t.encode("aaaa"), (Ids{aa, aa}));
  const Tokenizer nested = synthetic({{"a", "a"}, {"aa", "aa"}});
  EXPECT_EQ(nested.encode("aaaaa"), (Ids{id_of(nested, "aaaa"), 'a'}));
}

TEST(Bpe, ArrayAndStringMergesAgree) {
  const std::vector<std::pair<std::string, std::string>> merges = {
      {" ", "t"}, {"h", "e"}, {" t", "he"}, {"e", "r"}};
  const Tokenizer strings = Tokenizer::from_json(synthetic_tokenizer_json(merges, false), "s");
  const Tokenizer arrays = Tokenizer::from_json(synthetic_tokenizer_json(merges, true), "a");
  const std::string text = "the other there";
  EXPECT_EQ(strings.encode(text), arrays.encode(text));
  EXPECT_EQ(strings.encode(" the")[0], id_of(strings, " the"));
}

TEST(Bpe, IgnoreMergesTakesWholeVocabularyWords) {
  Json j = synthetic_tokenizer_json({{"a", "b"}});
  j["model"]["vocab"]["xyz"] = 300;  // no merges build it
  EXPECT_EQ(Tokenizer::from_json(j, "x").encode("xyz"), (Ids{'x', 'y', 'z'}));
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(Tokenizer::from_json(j, "x").encode("xyz"), Ids{300});
}

TEST(Bpe, LongWordsAndRepeatsUseTheCacheConsistently) {
  const Tokenizer t = synthetic({{"a", "b"}, {"ab", "ab"}, {"c", "d"}});
  std::string long_word(5000, 'a');
  for (size_t i = 1; i < long_word.size(); i += 2) long_word[i] = 'b';
  const Ids first = t.encode(long_word);
  EXPECT_EQ(first.size(), 1250u);  // 2500 "ab" merged pairwise into "abab"
  EXPECT_EQ(t.encode(long_word), first);
  EXPECT_EQ(t.encode("cd cd cd"), t.encode("cd cd cd"));
}

// The definition of BPE, slowly: merge the leftmost lowest-ranked pair until none has a merge.
Ids naive_bpe(std::string_view word, const std::map<std::pair<int32_t, int32_t>, size_t>& ranks,
              const std::vector<BpeMerge>& merges) {
  Ids ids;
  for (const char c : word) ids.push_back(static_cast<unsigned char>(c));
  for (;;) {
    size_t best = SIZE_MAX, at = 0;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      const auto it = ranks.find({ids[i], ids[i + 1]});
      if (it != ranks.end() && it->second < best) best = it->second, at = i;
    }
    if (best == SIZE_MAX) return ids;
    ids[at] = merges[best].merged;
    ids.erase(ids.begin() + long(at) + 1);
  }
}

// Random merges over a 5-letter alphabet, partly shuffled (a merge may then rank below the merges
// that build its parts) and with repeated pairs; words of every length class: the short array
// path, the tournament-tree path, and pieces too long for the word cache.
TEST(Bpe, MatchesTheNaiveMergeLoopOnRandomMerges) {
  std::mt19937 rng(7);
  for (int round = 0; round < 4; ++round) {
    BytesToId vocab;
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) vocab.emplace(std::string(1, char(b)), b);
    for (const char c : std::string("abcde")) tokens.emplace_back(1, c);
    std::vector<BpeMerge> merges;
    while (merges.size() < 400) {
      const std::string l = tokens[rng() % tokens.size()];
      const std::string r = tokens[rng() % tokens.size()];
      if (l.size() + r.size() > 12) continue;
      const auto [it, added] = vocab.emplace(l + r, int32_t(vocab.size()));
      if (added) tokens.push_back(l + r);
      merges.push_back(BpeMerge{vocab.at(l), vocab.at(r), it->second});
    }
    std::shuffle(merges.begin() + 100 * round, merges.begin() + 100 * round + 100, rng);
    std::map<std::pair<int32_t, int32_t>, size_t> ranks;
    for (size_t rank = 0; rank < merges.size(); ++rank)
      ranks[{merges[rank].left, merges[rank].right}] = rank;
    const BpeModel model(vocab, merges, false);
    for (int w = 0; w < 3000; ++w) {
      const size_t length = w % 10 == 0 ? 200 + rng() % 500 : 2 + rng() % 60;
      std::string word;
      for (size_t i = 0; i < length; ++i) word += char('a' + rng() % 5);
      const Ids expected = naive_bpe(word, ranks, merges);
      for (int pass = 0; pass < 2; ++pass) {  // the second from the word cache
        Ids ids = {-7};
        const std::string_view piece = word;
        model.encode_words({&piece, 1}, ids);
        ASSERT_EQ(Ids(ids.begin() + 1, ids.end()), expected) << word << " pass " << pass;
      }
    }
  }
}

TEST(WordCache, KeepsEntriesThroughGrowthAndClearsWhenFull) {
  WordCache cache;
  auto word = [](int i) { return "w" + std::to_string(i) + std::string(size_t(i % 7), 'x'); };
  // Enough words to grow every shard's table and overflow some shards (which then start over).
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const std::string w = word(i);
    const std::vector<int32_t> ids = {i, -i, 7};
    cache.insert(w, WordCache::hash(w), ids);
  }
  int found = 0;
  for (int i = 0; i < n; ++i) {
    const std::string w = word(i);
    std::vector<int32_t> ids = {42};
    if (!cache.lookup(w, WordCache::hash(w), ids)) continue;
    ++found;
    ASSERT_EQ(ids, (std::vector<int32_t>{42, i, -i, 7})) << w;
  }
  EXPECT_GT(found, n / 4);  // what survived the clears is still right
  EXPECT_LT(found, n);      // and the bound holds
  std::vector<int32_t> none;
  EXPECT_FALSE(cache.lookup("never inserted", WordCache::hash("never inserted"), none));
}

// Threads sharing one tokenizer contend for its word cache's shards (lookups, inserts, table
// regrowth): every encoding must equal a single-threaded one.
TEST(WordCache, ThreadsSharingATokenizerGetTheSingleThreadedIds) {
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"a", "b"}, {"ab", "c"}, {"c", "d"}, {" ", "a"}, {"abc", "d"}, {"d", "d"}};
  std::mt19937 rng(11);
  std::vector<std::string> texts;
  for (int i = 0; i < 300; ++i) {
    std::string text;
    for (int w = 0; w < 40; ++w) {
      text += ' ';
      const size_t length = 1 + rng() % (w % 8 == 0 ? 40 : 9);
      for (size_t k = 0; k < length; ++k) text += char('a' + rng() % 4);
    }
    texts.push_back(text);
  }
  std::vector<Ids> expected;
  const Tokenizer reference = synthetic(merges);
  for (const std::string& text : texts) expected.push_back(reference.encode(text));
  const Tokenizer shared = synthetic(merges);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int thread = 0; thread < 4; ++thread) {
    threads.emplace_back([&, thread] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t k = (i * 7 + size_t(thread) * 31 + size_t(round)) % texts.size();
          if (shared.encode(texts[k]) != expected[k]) ++mismatches;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

Json with_added(Json j) {
  j["added_tokens"] = Json::parse(R"([
    {"id": 1000, "content": "<|x|>", "special": true},
    {"id": 1001, "content": "<|xy|>", "special": true},
    {"id": 1002, "content": "<think>", "special": false}])");
  return j;
}

TEST(AddedTokens, MatchedLeftmostLongestBeforeBpe) {
  const Tokenizer t = Tokenizer::from_json(with_added(synthetic_tokenizer_json({})), "added");
  EXPECT_EQ(t.encode("a<|xy|>b<|x|><think>"), (Ids{'a', 1001, 'b', 1000, 1002}));
  EXPECT_EQ(t.encode("<|x<|x|>"), (Ids{'<', '|', 'x', 1000}));
  const Ids plain = t.encode("<|x|>", {.parse_special = false});
  EXPECT_EQ(plain.size(), 5u);
  EXPECT_EQ(t.decode(plain), "<|x|>");
}

TEST(AddedTokens, LongestWinsWhenOneIsAPrefixOfAnother) {
  Json j = synthetic_tokenizer_json({});
  j["added_tokens"] = Json::parse(R"([
    {"id": 1000, "content": "ab", "special": false},
    {"id": 1001, "content": "abcd", "special": false},
    {"id": 1002, "content": "ab", "special": false},
    {"id": 1003, "content": "x!", "special": false}])");
  const Tokenizer t = Tokenizer::from_json(j, "prefixes");
  // Of two tokens with the same content the first is matched.
  EXPECT_EQ(t.encode("abcdabcabx"), (Ids{1001, 1000, 'c', 1000, 'x'}));
  EXPECT_EQ(t.encode("xabx!a"), (Ids{'x', 1000, 1003, 'a'}));
  EXPECT_EQ(t.encode("a"), Ids{'a'});
  EXPECT_EQ(t.token_id("abcd"), 1001);
  EXPECT_EQ(t.token_id("abc"), std::nullopt);
}

TEST(AddedTokens, DecodeSkipsOnlySpecialOnes) {
  const Tokenizer t = Tokenizer::from_json(with_added(synthetic_tokenizer_json({})), "added");
  const Ids ids = {'a', 1000, 1002, 'b'};
  EXPECT_EQ(t.decode(ids, true), "a<think>b");
  EXPECT_EQ(t.decode(ids, false), "a<|x|><think>b");
  EXPECT_TRUE(t.is_special(1000));
  EXPECT_FALSE(t.is_special(1002));
  EXPECT_EQ(t.token_id("<|xy|>"), 1001);
  EXPECT_EQ(t.token_string(1001), "<|xy|>");
  EXPECT_EQ(t.token_string(' '), "\u0120");
  // Unknown ids (a gap, past the end, negative) decode to nothing.
  EXPECT_EQ(t.decode(Ids{'a', 999, 5000, -1, 'b'}), "ab");
  EXPECT_EQ(t.token_string(999), "");
}

TEST(PostProcessor, TemplateProcessingAddsPrefixWhenAsked) {
  Json j = with_added(synthetic_tokenizer_json({}));
  j["post_processor"] = Json::parse(R"({"type": "Sequence", "processors": [
    {"type": "ByteLevel"},
    {"type": "TemplateProcessing",
     "single": [{"SpecialToken": {"id": "<|x|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
     "special_tokens": {"<|x|>": {"id": "<|x|>", "ids": [1000], "tokens": ["<|x|>"]}}}]})");
  const Tokenizer t = Tokenizer::from_json(j, "pp");
  EXPECT_EQ(t.prefix_ids(), Ids{1000});
  EXPECT_EQ(t.encode("a"), Ids{'a'});
  EXPECT_EQ(t.encode("a", {.add_special_tokens = true}), (Ids{1000, 'a'}));
}

void expect_refused(const Json& j, const std::string& fragment) {
  try {
    Tokenizer::from_json(j, "bad.json");
    ADD_FAILURE() << "accepted a tokenizer.json with " << fragment;
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
  }
}

TEST(Loader, RefusesWhatItDoesNotImplement) {
  const Json base = synthetic_tokenizer_json({{"a", "b"}});
  Json j = base;
  j["normalizer"] = {{"type", "NFKC"}};
  expect_refused(j, "normalizer");
  j = base;
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\s+";
  expect_refused(j, "Split regex");
  j = base;
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"use_regex", true}};
  expect_refused(j, "pre_tokenizer");
  j = base;
  j["model"]["byte_fallback"] = true;
  expect_refused(j, "byte_fallback");
  j = base;
  j["model"]["merges"].push_back("q zz");
  expect_refused(j, "merge 'q zz'");
  j = base;
  j["added_tokens"] = Json::parse(R"([{"id": 999, "content": "<s>", "lstrip": true}])");
  expect_refused(j, "lstrip");
  j = base;
  j["model"]["vocab"]["\u4e16"] = 400;
  expect_refused(j, "ByteLevel alphabet");
  j = base;
  j["decoder"] = {{"type", "Metaspace"}};
  expect_refused(j, "decoder");
}

TEST(Loader, StreamingReaderAgreesWithTheJsonTree) {
  // load() streams the file (read_tokenizer_json); from_json() walks a tree: same tokenizer.
  const std::string path =
      test_util::npm_package_dir("tokenizer-llama3") + "/models/tokenizer.json";
  const std::string text = test_util::read_file(path);
  const TokenizerJsonParts streamed = read_tokenizer_json(text, path);
  const TokenizerJsonParts walked = split_tokenizer_json(Json::parse(text), path);
  EXPECT_EQ(streamed.rest, walked.rest);
  EXPECT_EQ(streamed.merges, walked.merges);
  EXPECT_EQ(streamed.vocab.size(), walked.vocab.size());
  EXPECT_EQ(streamed.merges.size(), 280147u);
  EXPECT_FALSE(streamed.rest["model"].contains("vocab"));
  EXPECT_EQ(streamed.rest["model"]["ignore_merges"], true);
}

TEST(Loader, StreamingReaderNamesBadInput) {
  auto error_of = [](const std::string& text) {
    try {
      read_tokenizer_json(text, "t.json");
    } catch (const RuntimeFailure& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("{\"model\": {\"vocab\": {}").find("t.json: not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_of("{\"model\": {\"vocab\": {}}}").find("model.merges is missing"),
            std::string::npos);
  EXPECT_NE(error_of("{\"model\": {\"vocab\": {\"a\": \"x\"}, \"merges\": []}}").find("integers"),
            std::string::npos);
  EXPECT_NE(error_of("{\"model\": {\"vocab\": {}, \"merges\": [\"ab\"]}}").find("merge 'ab'"),
            std::string::npos);
  EXPECT_NE(error_of("{\"model\": {\"vocab\": {}, \"merges\": [[\"a\"]]}}").find("two strings"),
            std::string::npos);
  const TokenizerJsonParts ok = read_tokenizer_json(
      R"({"x": [1, {"y": null}], "model": {"type": "BPE", "vocab": {"a": 0, "b": 1},
          "merges": ["a b", ["b", "a"]]}})",
      "ok.json");
  EXPECT_EQ(ok.rest, Json::parse(R"({"x": [1, {"y": null}], "model": {"type": "BPE"}})"));
  EXPECT_EQ(ok.vocab, (std::vector<std::pair<std::string, int64_t>>{{"a", 0}, {"b", 1}}));
  EXPECT_EQ(ok.merges, (std::vector<std::pair<std::string, std::string>>{{"a", "b"}, {"b", "a"}}));
}

TEST(Loader, MissingFileNamesIt) {
  try {
    Tokenizer::load("/nonexistent/model");
    ADD_FAILURE() << "loaded a missing file";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read /nonexistent/model"), std::string::npos);
  }
}

TEST(Qwen3Tokenizer, KnownIdsAndEncodings) {
  const Tokenizer& t = test_util::qwen3();
  EXPECT_EQ(t.id_limit(), 151669);
  EXPECT_EQ(t.token_id("<|endoftext|>"), 151643);
  EXPECT_EQ(t.token_id("<|im_start|>"), 151644);
  EXPECT_EQ(t.token_id("<|im_end|>"), 151645);
  EXPECT_TRUE(t.is_special(151645));
  EXPECT_FALSE(t.is_special(*t.token_id("<think>")));
  EXPECT_TRUE(t.normalizes_nfc());
  EXPECT_EQ(t.pre_tokenizer(), PreTokenizerPattern::kQwen2);
  EXPECT_TRUE(t.prefix_ids().empty());
  // Reference ids from the npm package's JavaScript tokenizer.
  EXPECT_EQ(t.encode("Hello, world!"), (Ids{9707, 11, 1879, 0}));
  EXPECT_EQ(t.encode("<|im_start|>user\nhi<|im_end|>\n"),
            (Ids{151644, 872, 198, 6023, 151645, 198}));
  EXPECT_EQ(t.encode("1234567"), (Ids{16, 17, 18, 19, 20, 21, 22}));
}

TEST(Qwen3Tokenizer, NormalizesToNfcBeforeBpe) {
  const Tokenizer& t = test_util::qwen3();
  EXPECT_EQ(t.encode("caf"
                     "e\u0301"),
            t.encode("caf\u00e9"));
  EXPECT_EQ(t.decode(t.encode("\u1100\u1161")), "\uac00");
}

TEST(Qwen3Tokenizer, ModelIdsPastTheVocabularyDecodeToNothing) {
  const Tokenizer& t = test_util::qwen3();
  EXPECT_EQ(t.decode(Ids{9707, 151700, 151935, 11}), "Hello,");
}

TEST(Qwen3Tokenizer, ArbitraryBytesRoundTripByteForByte) {
  const Tokenizer& t = test_util::qwen3();
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes(rng() % 64, '\0');
    for (char& c : bytes) c = char(rng() % 256);
    if (!nfc_quick_check(bytes)) continue;  // NFC may legitimately change valid parts
    std::string joined;
    for (const int32_t id : t.encode(bytes)) joined.append(t.token_bytes(id, false));
    // Added-token text can appear by chance only with '<'; compare the bytes either way.
    EXPECT_EQ(joined, bytes);
    std::string expected;
    append_lossy_utf8(bytes, expected);
    EXPECT_EQ(t.decode(t.encode(bytes)), expected);
  }
}

TEST(Llama3Tokenizer, KnownIdsAndPatterns) {
  const Tokenizer& t = test_util::llama3();
  EXPECT_EQ(t.token_id("<|begin_of_text|>"), 128000);
  EXPECT_EQ(t.token_id("<|end_of_text|>"), 128001);
  EXPECT_EQ(t.token_id("<|eot_id|>"), 128009);
  EXPECT_EQ(t.pre_tokenizer(), PreTokenizerPattern::kLlama3);
  EXPECT_FALSE(t.normalizes_nfc());
  // Three digits per piece: "1234567" is three tokens.
  EXPECT_EQ(t.encode("1234567").size(), 3u);
  EXPECT_EQ(t.decode(t.encode("e\u0301")), "e\u0301");  // no normalizer
}

}  // namespace
}  // namespace gpufrac::engine
