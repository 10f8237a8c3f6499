// The text side of the OpenAI server without sockets, on the real Qwen3 tokenizer: text prompts,
// chat messages through the template, stop strings, /tokenize and /detokenize replies, every
// refusal (status, param, message), a server without a tokenizer, and GeneratedText (UTF-8 held
// across tokens, stop strings across tokens, held text released, EOS text left out, min_tokens).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <variant>

#include "engine/api/generated_text.h"
#include "engine/api/generation_request.h"
#include "engine/api/tokenize_request.h"
#include "fuzz_request_corpus.h"
#include "served_tokenizer_support.h"

namespace gpufrac::testing {
namespace {

using engine::FinishReason;
using engine::GeneratedText;
using engine::GenerationEndpoint;
using engine::GenerationRequest;
using engine::RequestError;
using engine::RequestLimits;

RequestLimits limits(const engine::ServedTokenizer& text, int max_model_len = 256) {
  return {"tiny", kQwen3VocabSize, max_model_len, &text};
}

template <typename T>
T ok(const std::variant<T, RequestError>& r, const std::string& body) {
  if (auto* e = std::get_if<RequestError>(&r)) {
    ADD_FAILURE() << body << " -> " << e->status << " " << e->message;
    return {};
  }
  return std::get<T>(r);
}

template <typename T>
RequestError error(const std::variant<T, RequestError>& r, const std::string& body) {
  if (!std::holds_alternative<RequestError>(r)) {
    ADD_FAILURE() << body << " was accepted";
    return {};
  }
  return std::get<RequestError>(r);
}

GenerationRequest completion(const std::string& body,
                             const engine::ServedTokenizer& text = served_qwen3()) {
  return ok(engine::parse_generation_request(body, limits(text), GenerationEndpoint::kCompletions),
            body);
}
GenerationRequest chat(const std::string& body,
                       const engine::ServedTokenizer& text = served_qwen3()) {
  return ok(
      engine::parse_generation_request(body, limits(text), GenerationEndpoint::kChatCompletions),
      body);
}
const engine::Tokenizer& qwen3() {
  return *served_qwen3().get();
}

// "w w w ...": one token per word.
std::string words(int n) {
  std::string text = "w";
  for (int i = 1; i < n; ++i) text += " w";
  return text;
}

struct Refusal {
  std::string body;
  int status;
  std::string param;
  std::string says;
};

void expect_refusals(const std::vector<Refusal>& cases,
                     const std::function<std::optional<RequestError>(const std::string&)>& parse) {
  for (const Refusal& c : cases) {
    std::optional<RequestError> e = parse(c.body);
    if (!e) {
      ADD_FAILURE() << c.body << " was accepted";
      continue;
    }
    EXPECT_EQ(e->status, c.status) << c.body << " -> " << e->message;
    EXPECT_EQ(e->param, c.param) << c.body << " -> " << e->message;
    EXPECT_NE(e->message.find(c.says), std::string::npos) << c.body << " -> " << e->message;
  }
}

template <typename T>
std::optional<RequestError> error_of(const std::variant<T, RequestError>& r) {
  if (auto* e = std::get_if<RequestError>(&r)) return *e;
  return std::nullopt;
}

TEST(TextRequest, LoadsTheQwen3TokenizerAndChatTemplateLikeServe) {
  const engine::ServedTokenizer& served = served_qwen3();
  ASSERT_TRUE(served.chat_template.has_value());
  EXPECT_EQ(*served.chat_template, engine::ChatTemplateKind::kQwen3);
  EXPECT_EQ(served.chat_stop_ids, (std::vector<int32_t>{151645, 151643}));
  EXPECT_EQ(qwen3().encode("Hello world"), (std::vector<int32_t>{9707, 1879}));
}

TEST(TextRequest, TextPromptsAreEncoded) {
  EXPECT_EQ(completion(R"({"prompt":"Hello world"})").engine.prompt,
            (std::vector<int32_t>{9707, 1879}));
  EXPECT_EQ(completion(R"({"prompt":["Hello world"]})").engine.prompt,
            (std::vector<int32_t>{9707, 1879}));
  // Added tokens in the text become their ids (as vLLM's /v1/completions does).
  EXPECT_EQ(completion(R"({"prompt":"<|im_start|>user\nHi!"})").engine.prompt,
            (std::vector<int32_t>{151644, 872, 198, 13048, 0}));
  // Token ids still bypass the tokenizer.
  EXPECT_EQ(completion(R"({"prompt":[1,2,3]})").engine.prompt, (std::vector<int32_t>{1, 2, 3}));
  // echo: a text prompt as sent, token ids decoded (special tokens as skip_special_tokens says).
  EXPECT_EQ(completion(R"({"prompt":"Hello  world","echo":true})").echo_text, "Hello  world");
  const std::vector<int32_t> ids = qwen3().encode("<|im_start|>Hi", {});
  const std::string prompt_ids = Json(ids).dump();
  EXPECT_EQ(completion(R"({"echo":true,"prompt":)" + prompt_ids + "}").echo_text, "Hi");
  EXPECT_EQ(completion(R"({"echo":true,"skip_special_tokens":false,"prompt":)" + prompt_ids + "}")
                .echo_text,
            "<|im_start|>Hi");
}

TEST(TextRequest, StopStringsAreReadAndValidated) {
  EXPECT_EQ(completion(R"({"prompt":"x","stop":"\n"})").stop_strings,
            (std::vector<std::string>{"\n"}));
  EXPECT_EQ(completion(R"({"prompt":"x","stop":["a","","bc"]})").stop_strings,
            (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(completion(R"({"prompt":"x","stop":[]})").stop_strings.empty());
  EXPECT_FALSE(completion(R"({"prompt":"x","skip_special_tokens":false})").skip_special_tokens);
  std::string sixteen = "[", seventeen;
  for (int i = 0; i < 16; ++i) sixteen += (i ? ",\"s" : "\"s") + std::to_string(i) + "\"";
  seventeen = sixteen + ",\"s16\"]";
  sixteen += "]";
  EXPECT_EQ(completion(R"({"prompt":"x","stop":)" + sixteen + "}").stop_strings.size(), 16u);
  std::string long_stop = "\"" + std::string(1025, 'a') + "\"";
  expect_refusals(
      {
          {R"({"prompt":"x","stop":)" + seventeen + "}", 400, "stop", "at most 16"},
          {R"({"prompt":"x","stop":["a",5]})", 400, "stop", "stop[1] must be a string"},
          {R"({"prompt":"x","stop":{"a":1}})", 400, "stop", "string or an array"},
          {R"({"prompt":"x","stop":)" + long_stop + "}", 400, "stop", "at most 1024"},
      },
      [](const std::string& body) {
        return error_of(engine::parse_generation_request(body, limits(served_qwen3()),
                                                         GenerationEndpoint::kCompletions));
      });
}

TEST(TextRequest, TextPromptRefusals) {
  expect_refusals(
      {
          {R"({"prompt":""})", 400, "prompt", "empty"},
          {R"({"prompt":["a","b"]})", 400, "prompt", "one prompt per request"},
          {R"({"prompt":[["a"]]})", 400, "prompt", "integer token id"},
          {R"({"prompt":true})", 400, "prompt", "string or an array"},
          {R"({"prompt":"x","add_special_tokens":"yes"})", 400, "add_special_tokens",
           "true or false"},
          {R"({"prompt":")" + words(300) + R"("})", 400, "prompt", "maximum context length"},
          {R"({"prompt":"Hello","max_tokens":256})", 400, "max_tokens",
           "maximum context length is 256"},
      },
      [](const std::string& body) {
        return error_of(engine::parse_generation_request(body, limits(served_qwen3()),
                                                         GenerationEndpoint::kCompletions));
      });
}

TEST(TextRequest, ChatMessagesGoThroughTheTemplate) {
  GenerationRequest r = chat(R"({"model":"tiny","messages":[{"role":"user","content":"Hi!"}]})");
  EXPECT_EQ(r.engine.prompt,
            (std::vector<int32_t>{151644, 872, 198, 13048, 0, 151645, 198, 151644, 77091, 198}));
  // The default length is what the context leaves (vLLM's rule for chat).
  EXPECT_EQ(r.engine.stop.max_tokens, 256 - 10);
  // The template's end-of-turn ids stop generation, unless ignore_eos.
  EXPECT_EQ(r.engine.stop.stop_token_ids, (std::vector<int32_t>{151645, 151643}));
  EXPECT_TRUE(chat(R"({"messages":[{"role":"user","content":"Hi!"}],"ignore_eos":true})")
                  .engine.stop.stop_token_ids.empty());
  EXPECT_EQ(chat(R"({"messages":[{"role":"user","content":"Hi!"}],"stop_token_ids":[7,151645]})")
                .engine.stop.stop_token_ids,
            (std::vector<int32_t>{7, 151645, 151643}));

  // Text parts are joined with "\n"; a system turn and an earlier assistant turn; thinking off.
  GenerationRequest parts = chat(R"({"messages":[
      {"role":"system","content":"Be brief."},
      {"role":"user","content":[{"type":"text","text":"Hello"},{"type":"text","text":"world"}]},
      {"role":"assistant","content":"Hi."},
      {"role":"user","content":"Again"}],
      "chat_template_kwargs":{"enable_thinking":false},
      "max_completion_tokens":5,"max_tokens":9,"min_tokens":2,"temperature":0.5,"top_p":0.9,
      "top_k":20,"seed":7,"stop":["\n\n"],"stream":true,"stream_options":{"include_usage":true}})");
  const std::vector<engine::ChatMessage> messages = {
      {"system", "Be brief."}, {"user", "Hello\nworld"}, {"assistant", "Hi."}, {"user", "Again"}};
  engine::ChatTemplateOptions no_thinking;
  no_thinking.enable_thinking = false;
  EXPECT_EQ(parts.engine.prompt, qwen3().encode(engine::apply_chat_template(
                                     engine::ChatTemplateKind::kQwen3, messages, no_thinking)));
  EXPECT_EQ(parts.engine.stop.max_tokens, 5) << "max_completion_tokens wins over max_tokens";
  EXPECT_EQ(parts.engine.stop.min_tokens, 2);
  EXPECT_FLOAT_EQ(parts.engine.temperature, 0.5f);
  EXPECT_FLOAT_EQ(parts.engine.top_p, 0.9f);
  EXPECT_EQ(parts.engine.top_k, 20);
  EXPECT_EQ(parts.engine.seed, 7u);
  EXPECT_EQ(parts.stop_strings, (std::vector<std::string>{"\n\n"}));
  EXPECT_TRUE(parts.stream);
  EXPECT_TRUE(parts.include_usage);
  EXPECT_EQ(
      chat(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":9})").engine.stop.max_tokens,
      9);
  EXPECT_EQ(parts.engine.logprobs, -1);
  const std::string user = R"({"messages":[{"role":"user","content":"x"}],)";
  EXPECT_EQ(chat(user + R"("logprobs":true,"top_logprobs":2})").engine.logprobs, 2);
  EXPECT_EQ(chat(user + R"("logprobs":true})").engine.logprobs, 0);
  EXPECT_EQ(chat(user + R"("logprobs":false,"top_logprobs":0})").engine.logprobs, -1);
  // No generation prompt when asked; assistant content may be null.
  GenerationRequest plain = chat(R"({"messages":[{"role":"user","content":"Hi!"},
      {"role":"assistant","content":null}],"add_generation_prompt":false})");
  EXPECT_EQ(plain.engine.prompt.back(), 198);  // "<|im_end|>\n" closes the last turn
}

TEST(TextRequest, ChatRefusals) {
  expect_refusals(
      {
          {R"({"model":"gpt-4o","messages":[{"role":"user","content":"x"}]})", 404, "model",
           "does not exist"},
          {R"({"max_tokens":3})", 400, "messages", "'messages' is required"},
          {R"({"messages":[]})", 400, "messages", "non-empty array"},
          {R"({"messages":"hello"})", 400, "messages", "non-empty array"},
          {R"({"messages":[5]})", 400, "messages", "messages[0] must be an object"},
          {R"({"messages":[{"content":"x"}]})", 400, "messages",
           "messages[0].role must be a string"},
          {R"({"messages":[{"role":"tool","content":"x"}]})", 400, "messages", "messages[0].role"},
          {R"({"messages":[{"role":"user","content":5}]})", 400, "messages",
           "messages[0].content must be"},
          {R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})", 400,
           "messages", "only \"text\" parts"},
          {R"({"messages":[{"role":"user","content":[{"type":"text"}]}]})", 400, "messages",
           "messages[0].content[0].text must be a string"},
          {R"({"messages":[{"role":"user","content":["x"]}]})", 400, "messages",
           "must be an object"},
          {R"({"messages":[{"role":"assistant","content":"x","tool_calls":[{"id":"1"}]}]})", 400,
           "messages", "tool calls"},
          {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})", 400,
           "tools", "not supported"},
          {R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", 400, "top_logprobs",
           "needs 'logprobs': true"},
          {R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})", 400,
           "top_logprobs", "between 0 and 20"},
          {R"({"messages":[{"role":"user","content":"x"}],"logprobs":2})", 400, "logprobs",
           "true or false"},
          {R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}})",
           400, "response_format", "not supported"},
          {R"({"messages":[{"role":"user","content":"x"}],"n":0})", 400, "n", "between 1"},
          {R"({"messages":[{"role":"user","content":"x"}],"echo":true})", 400, "echo",
           "only supported by /v1/completions"},
          {R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":0})", 400,
           "max_completion_tokens", "between 1"},
          {R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":250})", 400,
           "max_completion_tokens", "maximum context length"},
          {R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":[1]})", 400,
           "chat_template_kwargs", "object"},
          {R"({"messages":[{"role":"user","content":")" + words(300) + R"("}]})", 400, "messages",
           "maximum context length"},
          {R"({"messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}})",
           400, "stream_options", "only allowed"},
      },
      [](const std::string& body) {
        return error_of(engine::parse_generation_request(body, limits(served_qwen3()),
                                                         GenerationEndpoint::kChatCompletions));
      });
  // Explicitly neutral values are fine.
  chat(R"({"messages":[{"role":"user","content":"x"}],"logprobs":false,"tools":[],"n":1,
           "tool_choice":"none","response_format":{"type":"text"},"user":"u","extra":{}})");
}

TEST(TextRequest, WithoutATokenizerTextAnswersWithTheFix) {
  const engine::ServedTokenizer& none = served_nothing();
  auto says_fix = [](const RequestError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_NE(e.message.find("test server without tokenizer data"), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("scripts/install-deps"), std::string::npos) << e.message;
  };
  says_fix(error(engine::parse_generation_request(R"({"prompt":"Hi"})", limits(none),
                                                  GenerationEndpoint::kCompletions),
                 "text"));
  says_fix(error(engine::parse_generation_request(R"({"prompt":[1],"stop":"x"})", limits(none),
                                                  GenerationEndpoint::kCompletions),
                 "stop"));
  says_fix(
      error(engine::parse_generation_request(R"({"messages":[{"role":"user","content":"x"}]})",
                                             limits(none), GenerationEndpoint::kChatCompletions),
            "chat"));
  says_fix(error(engine::tokenize_reply(R"({"prompt":"Hi"})", limits(none)), "tokenize"));
  says_fix(error(engine::detokenize_reply(R"({"tokens":[1]})", limits(none)), "detokenize"));
  // Token ids still work, and an empty stop list needs nothing.
  EXPECT_EQ(completion(R"({"prompt":[1,2],"stop":[]})", none).engine.prompt,
            (std::vector<int32_t>{1, 2}));
  // A tokenizer without a recognised chat template: chat names --chat-template.
  engine::ServedTokenizerOptions options;
  options.model = "tiny";
  options.model_is_preset = true;
  options.vocab_size = kQwen3VocabSize;
  engine::ServedTokenizer no_template = engine::load_served_tokenizer(options);
  no_template.chat_template.reset();
  RequestError e = error(
      engine::parse_generation_request(R"({"messages":[{"role":"user","content":"x"}]})",
                                       limits(no_template), GenerationEndpoint::kChatCompletions),
      "no template");
  EXPECT_NE(e.message.find("--chat-template"), std::string::npos) << e.message;
}

TEST(TextRequest, TokenizeAndDetokenizeReplies) {
  auto tokenize = [](const std::string& body) {
    return ok(engine::tokenize_reply(body, limits(served_qwen3())), body);
  };
  Json t = tokenize(R"({"model":"tiny","prompt":"Hello world"})");
  EXPECT_EQ(
      t, Json::parse(R"({"count":2,"max_model_len":256,"tokens":[9707,1879],"token_strs":null})"));
  EXPECT_EQ(tokenize(R"({"prompt":"Hello world","return_token_strs":true})")["token_strs"],
            Json::parse(R"(["Hello","Ġworld"])"));
  Json m = tokenize(R"({"messages":[{"role":"user","content":"Hi!"}]})");
  EXPECT_EQ(m["tokens"], Json::parse("[151644,872,198,13048,0,151645,198,151644,77091,198]"));
  EXPECT_EQ(m["count"], 10);
  EXPECT_EQ(
      tokenize(R"({"messages":[{"role":"user","content":"Hi!"}],"add_generation_prompt":false})")
          ["count"],
      7);
  // The count is exactly what a chat completion's usage.prompt_tokens will say.
  EXPECT_EQ(m["tokens"].get<std::vector<int32_t>>(),
            chat(R"({"messages":[{"role":"user","content":"Hi!"}]})").engine.prompt);

  auto detokenize = [](const std::string& body) {
    return ok(engine::detokenize_reply(body, limits(served_qwen3())), body);
  };
  EXPECT_EQ(detokenize(R"({"model":"tiny","tokens":[9707,1879]})"),
            Json::parse(R"({"prompt":"Hello world"})"));
  // Special tokens are included; ids the tokenizer does not know (151669..151935) add nothing.
  EXPECT_EQ(detokenize(R"({"tokens":[151644,872,151900]})")["prompt"], "<|im_start|>user");
  // Half a character becomes U+FFFD, never broken UTF-8.
  std::vector<int32_t> emoji = qwen3().encode("😀");
  ASSERT_EQ(emoji.size(), 1u);
  Json half = detokenize(R"({"tokens":[)" + std::to_string(qwen3().encode("\xF0\x9F")[0]) + "]}");
  EXPECT_EQ(half["prompt"], "\xEF\xBF\xBD");

  std::string many = "[";
  for (int i = 0; i < 257; ++i) many += (i ? ",1" : "1");
  many += "]";
  expect_refusals(
      {
          {R"({"prompt":"x","model":"other"})", 404, "model", "does not exist"},
          {R"({"prompt":5})", 400, "prompt", "must be a string"},
          {R"({})", 400, "prompt", "'messages' is required"},
          {R"({"messages":[{"role":"bot","content":"x"}]})", 400, "messages", "role"},
          {R"({"prompt":")" + words(257) + R"("})", 400, "prompt", "maximum context length is 256"},
          {R"({"prompt":"x","return_token_strs":"yes"})", 400, "return_token_strs",
           "true or false"},
          {"not json", 400, "", "not valid JSON"},
      },
      [](const std::string& body) {
        return error_of(engine::tokenize_reply(body, limits(served_qwen3())));
      });
  expect_refusals(
      {
          {R"({"tokens":[1,151936]})", 400, "tokens",
           "tokens[1] = 151936 is outside the vocabulary"},
          {R"({"tokens":[-1]})", 400, "tokens", "outside the vocabulary"},
          {R"({"tokens":"abc"})", 400, "tokens", "array of token ids"},
          {R"({"tokens":[1.5]})", 400, "tokens", "integer token id"},
          {R"({})", 400, "tokens", "required"},
          {R"({"tokens":)" + many + "}", 400, "tokens", "maximum context length"},
          {R"({"tokens":[1],"model":3})", 400, "model", "string"},
      },
      [](const std::string& body) {
        return error_of(engine::detokenize_reply(body, limits(served_qwen3())));
      });
}

// A valid body of one of the text endpoints (chat, text completion, tokenize, detokenize).
std::string valid_text_body(std::mt19937& rng, int endpoint) {
  static const char* kTexts[] = {"Hello", "Grüße 世界 😀", "<|im_start|>user\n", "a\\nb", "  x  "};
  auto text = [&] { return std::string("\"") + kTexts[rng() % std::size(kTexts)] + "\""; };
  std::string common =
      ",\"max_tokens\":" + std::to_string(1 + rng() % 8) +
      (rng() % 2 ? ",\"stop\":[" + text() + "," + text() + "]" : "") +
      (rng() % 2 ? ",\"stream\":true,\"stream_options\":{\"include_usage\":true}" : "");
  switch (endpoint) {
    case 0:
      return "{\"model\":\"tiny\",\"messages\":[{\"role\":\"system\",\"content\":" + text() +
             "},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":" + text() + "}]}]" +
             common + "}";
    case 1:
      return "{\"model\":\"tiny\",\"prompt\":" + text() + common + "}";
    case 2:
      return "{\"prompt\":" + text() + ",\"return_token_strs\":true}";
    default:
      return "{\"tokens\":[151644," + std::to_string(rng() % 151936) + ",872]}";
  }
}

// Mutated bodies at every text parser: no exception, 4xx refusals with a message that is valid
// UTF-8 (it goes into a JSON error body), and accepted requests the engine can run.
TEST(TextRequest, FuzzedBodiesAreRefusedCleanly) {
  const RequestLimits small = limits(served_qwen3(), 64);
  std::mt19937 rng(7);
  int accepted = 0;
  for (int i = 0; i < 8000; ++i) {
    const int endpoint = int(rng() % 4);
    const std::string body = mutate(valid_text_body(rng, endpoint), rng);
    std::optional<RequestError> error;
    if (endpoint < 2) {
      std::variant<GenerationRequest, RequestError> r;
      ASSERT_NO_THROW(r = endpoint == 0 ? engine::parse_generation_request(
                                              body, small, GenerationEndpoint::kChatCompletions)
                                        : engine::parse_generation_request(
                                              body, small, GenerationEndpoint::kCompletions))
          << body;
      error = error_of(r);
      if (!error) {
        const engine::EngineRequest& e = std::get<GenerationRequest>(r).engine;
        ASSERT_FALSE(e.prompt.empty()) << body;
        for (int32_t t : e.prompt) ASSERT_TRUE(t >= 0 && t < kQwen3VocabSize) << body;
        ASSERT_LE(int64_t(e.prompt.size()) + e.stop.max_tokens, 64) << body;
      }
    } else {
      std::variant<Json, RequestError> r;
      ASSERT_NO_THROW(r = endpoint == 2 ? engine::tokenize_reply(body, small)
                                        : engine::detokenize_reply(body, small))
          << body;
      error = error_of(r);
      if (!error) {
        ASSERT_NO_THROW((void)std::get<Json>(r).dump()) << body;
      }
    }
    if (!error) {
      ++accepted;
      continue;
    }
    ASSERT_TRUE(error->status == 400 || error->status == 404) << body << " -> " << error->message;
    ASSERT_FALSE(error->message.empty()) << body;
    ASSERT_NO_THROW((void)Json(error->message).dump())
        << body << " -> invalid UTF-8 in the message";
  }
  EXPECT_GT(accepted, 100) << "the mutations leave some bodies valid";
}

TEST(TextRequest, LongValuesInMessagesAreCutOnACharacterBoundary) {
  const std::string body = R"({"prompt":[1,"éééééééééééééééééééééééééééééééééééééééé"]})";
  RequestError e = error(engine::parse_generation_request(body, limits(served_qwen3()),
                                                          GenerationEndpoint::kCompletions),
                         body);
  EXPECT_NE(e.message.find("..."), std::string::npos) << e.message;
  EXPECT_NO_THROW((void)Json(e.message).dump()) << e.message;
}

// Feeds `ids` through a GeneratedText (the last with `last_reason`); returns the deltas.
std::vector<std::string> deltas_of(GeneratedText& text, const std::vector<int32_t>& ids,
                                   FinishReason last_reason = FinishReason::kLength) {
  std::vector<std::string> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    out.push_back(text.add(ids[i], i + 1 == ids.size() ? last_reason : FinishReason::kNone));
  }
  return out;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string all;
  for (const std::string& p : parts) all += p;
  return all;
}

TEST(GeneratedText, HoldsSplitCharactersAndEmitsEachByteOnce) {
  // Byte-level tokens that each hold part of a character.
  std::vector<int32_t> ids = qwen3().encode("a");
  for (int32_t id : qwen3().encode("\xF0\x9F")) ids.push_back(id);
  for (int32_t id : qwen3().encode("\x98\x80")) ids.push_back(id);
  for (int32_t id : qwen3().encode("b")) ids.push_back(id);
  GeneratedText text(&qwen3(), {});
  std::vector<std::string> deltas = deltas_of(text, ids);
  EXPECT_EQ(deltas.front(), "a");
  EXPECT_EQ(joined(deltas), "a😀b");
  for (const std::string& d : deltas)
    EXPECT_TRUE(d.empty() || d == "a" || d == "😀" || d == "b") << d;
}

TEST(GeneratedText, StopStringAcrossTokensEndsTheTextBeforeIt) {
  std::vector<int32_t> ids = qwen3().encode("Hello world, this is the end. More text.");
  ASSERT_GT(ids.size(), 8u);
  GeneratedText text(&qwen3(), {.stop_strings = {"the end"}});
  std::string out;
  size_t i = 0;
  for (; i < ids.size() && !text.stopped(); ++i) out += text.add(ids[i], FinishReason::kNone);
  EXPECT_TRUE(text.stopped());
  EXPECT_EQ(out, "Hello world, this is ");
  EXPECT_EQ(text.add(ids[i], FinishReason::kNone), "") << "nothing after a stop";
  // The stop string's first part was held back until it could no longer be anything else.
  GeneratedText held(&qwen3(), {.stop_strings = {"is the beginning"}});
  std::vector<std::string> deltas = deltas_of(held, ids);
  EXPECT_FALSE(held.stopped());
  EXPECT_EQ(joined(deltas), "Hello world, this is the end. More text.");
  EXPECT_NE(std::find(deltas.begin(), deltas.end(), ""), deltas.end()) << "\"is the\" was held";
}

TEST(GeneratedText, HeldTextIsReleasedAtTheEnd) {
  std::vector<int32_t> ids = qwen3().encode("It ends with Hel");
  GeneratedText text(&qwen3(), {.stop_strings = {"Hello"}});
  std::vector<std::string> deltas = deltas_of(text, ids, FinishReason::kLength);
  EXPECT_EQ(joined(deltas), "It ends with Hel");
  EXPECT_NE(deltas.back().find("Hel"), std::string::npos) << "held until the last token";
}

TEST(GeneratedText, EosTextIsLeftOutAndSpecialTokensSkipped) {
  std::vector<int32_t> ids = qwen3().encode("Hi<|im_start|> there");
  ids.push_back(151645);  // <|im_end|> as the EOS that ends the sequence
  GeneratedText skip(&qwen3(), {});
  EXPECT_EQ(joined(deltas_of(skip, ids, FinishReason::kStop)), "Hi there");
  engine::GeneratedTextOptions keep_special;
  keep_special.skip_special_tokens = false;
  GeneratedText keep(&qwen3(), keep_special);
  EXPECT_EQ(joined(deltas_of(keep, ids, FinishReason::kStop)), "Hi<|im_start|> there");
  // A stop token id that is ordinary text: its text is left out too (vLLM's rule).
  GeneratedText stop_id(&qwen3(), {});
  std::vector<int32_t> words = qwen3().encode("one two");
  EXPECT_EQ(joined(deltas_of(stop_id, words, FinishReason::kStop)), "one");
}

TEST(GeneratedText, StopStringsWaitForMinTokens) {
  std::vector<int32_t> ids = qwen3().encode("a b a b a");
  ASSERT_EQ(ids.size(), 5u);
  GeneratedText text(&qwen3(), {.stop_strings = {"a"}, .min_tokens = 3});
  std::vector<std::string> deltas = deltas_of(text, ids);
  EXPECT_TRUE(text.stopped());
  EXPECT_EQ(joined(deltas), "a b ");  // the third token (" a") is the first one checked
}

TEST(GeneratedText, WithoutATokenizerEachIdIsItsText) {
  GeneratedText text(nullptr, {.stop_strings = {"1"}});
  EXPECT_EQ(joined(deltas_of(text, {12, 151645, 7}, FinishReason::kStop)), " 12 151645 7");
  EXPECT_FALSE(text.stopped());
}

}  // namespace
}  // namespace gpufrac::testing
