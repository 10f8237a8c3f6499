// The server's text endpoints over real sockets, on a FakeRunner with Qwen3's vocabulary and the
// real Qwen3 tokenizer (so the generated ids are known and deterministic): streamed text is whole
// characters and equals decode(ids); stop strings across chunk boundaries end the request early
// with "stop" and free its blocks; text held back for a possible stop is released; the chat
// streaming layout (role chunk, content deltas, finish chunk, usage chunk, [DONE]); the
// end-of-turn token stops chat; /tokenize and /detokenize; every error path of the text endpoints.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/json.h"
#include "served_tokenizer_support.h"
#include "server_test_client.h"
#include "server_test_fixture.h"

namespace gpufrac::testing {
namespace {

using namespace std::chrono_literals;

ServerSetup text_setup(int vocab_size = kQwen3VocabSize) {
  ServerSetup setup;
  setup.runner.vocab_size = vocab_size;
  setup.max_model_len = 512;
  setup.tokenizer = &served_qwen3();
  return setup;
}

RawReply post(const FakeServer& server, const std::string& path, const Json& body) {
  return http_exchange(server.port(), http_post(path, body.dump()));
}

// One streamed choice per chunk (chunks without choices, e.g. usage, are kept in `chunks`).
struct Stream {
  std::vector<Json> chunks;
  std::vector<std::string> texts;  // completions: "text"; chat: delta.content ("" when absent)
  std::vector<int32_t> ids;        // completions only
  std::string finish_reason;
  Json usage;
  bool done = false;
};

Stream read_stream(const RawReply& r) {
  Stream s;
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "text/event-stream");
  for (const std::string& event : sse_data(r.body)) {
    EXPECT_FALSE(s.done) << "an event after [DONE]";
    if (event == "[DONE]") {
      s.done = true;
      continue;
    }
    // Json::parse rejects ill-formed UTF-8: every chunk is whole characters.
    Json chunk = Json::parse(event, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(chunk.is_discarded()) << event;
    if (chunk.is_discarded()) continue;
    s.chunks.push_back(chunk);
    if (chunk.contains("usage") && chunk["usage"].is_object()) s.usage = chunk["usage"];
    if (chunk["choices"].empty()) continue;
    const Json& choice = chunk["choices"][0];
    if (choice.contains("text")) {
      s.texts.push_back(choice["text"]);
      s.ids.push_back(choice["token_ids"][0]);
    } else {
      s.texts.push_back(choice["delta"].value("content", ""));
    }
    if (choice["finish_reason"].is_string()) {
      EXPECT_TRUE(s.finish_reason.empty()) << "two chunks with a finish_reason";
      s.finish_reason = choice["finish_reason"];
    }
  }
  EXPECT_TRUE(s.done) << r.body;
  return s;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string all;
  for (const std::string& p : parts) all += p;
  return all;
}

Json completion_body(const std::string& prompt, int max_tokens, bool stream) {
  Json body = {{"model", "fake-model"},
               {"prompt", prompt},
               {"max_tokens", max_tokens},
               {"temperature", 0},
               {"ignore_eos", true}};
  if (stream) body["stream"] = true;
  return body;
}

TEST(TextServer, StreamedTextIsWholeCharactersAndEqualsDecode) {
  FakeServer server(text_setup());
  const engine::Tokenizer& tokenizer = *served_qwen3().get();
  int held_somewhere = 0;
  for (int seed = 0; seed < 12; ++seed) {
    Json body = completion_body("Tell me a story number " + std::to_string(seed), 48, true);
    body["temperature"] = 1;
    body["seed"] = seed;
    Stream s = read_stream(post(server, "/v1/completions", body));
    ASSERT_EQ(s.ids.size(), 48u);
    EXPECT_EQ(joined(s.texts), tokenizer.decode(s.ids)) << "seed " << seed;
    EXPECT_EQ(s.finish_reason, "length");
    for (size_t i = 0; i < s.ids.size(); ++i) {
      held_somewhere += s.texts[i].empty() && !tokenizer.token_bytes(s.ids[i], true).empty();
    }
    // Not streamed: the same text in one body.
    body.erase("stream");
    RawReply whole = post(server, "/v1/completions", body);
    ASSERT_EQ(whole.status, 200) << whole.body;
    Json choice = Json::parse(whole.body)["choices"][0];
    EXPECT_EQ(choice["text"], joined(s.texts));
    EXPECT_EQ(choice["token_ids"], Json(s.ids));
  }
  // Random ids of Qwen3's vocabulary include byte tokens: some text was held for a next token.
  EXPECT_GT(held_somewhere, 0);
}

// A greedy run without stop strings, the reference the stop tests cut.
Stream reference_run(const FakeServer& server, const std::string& prompt, int max_tokens) {
  Stream s =
      read_stream(post(server, "/v1/completions", completion_body(prompt, max_tokens, true)));
  EXPECT_EQ(s.texts.size(), size_t(max_tokens));
  return s;
}

// The first k >= from with texts[k] and texts[k + 1] both non-empty.
size_t two_texts_from(const Stream& s, size_t from) {
  for (size_t k = from; k + 1 < s.texts.size(); ++k) {
    if (!s.texts[k].empty() && !s.texts[k + 1].empty()) return k;
  }
  ADD_FAILURE() << "no two consecutive non-empty chunks";
  return from;
}

TEST(TextServer, StopStringAcrossChunksEndsTheRequestEarly) {
  FakeServer server(text_setup());
  const std::string prompt = "Once upon a time";
  Stream ref = reference_run(server, prompt, 40);
  const size_t k = two_texts_from(ref, 6);
  const std::string stop = ref.texts[k] + ref.texts[k + 1];  // spans chunks k and k + 1
  const std::string full = joined(ref.texts);
  const size_t at = full.find(stop);
  ASSERT_NE(at, std::string::npos);
  ASSERT_GT(at, 0u);
  // The token that completes the first occurrence.
  size_t end_token = 0;
  for (size_t length = 0; end_token < ref.texts.size(); ++end_token) {
    length += ref.texts[end_token].size();
    if (length >= at + stop.size()) break;
  }

  Json body = completion_body(prompt, 40, true);
  body["stop"] = Json::array({"never appears \u2603", stop});
  body["stream_options"] = {{"include_usage", true}};
  Stream s = read_stream(post(server, "/v1/completions", body));
  EXPECT_EQ(joined(s.texts), full.substr(0, at));
  EXPECT_EQ(s.finish_reason, "stop");
  EXPECT_EQ(s.ids.size(), end_token + 1) << "no token after the one that completed the stop";
  EXPECT_EQ(s.usage["completion_tokens"], end_token + 1);
  EXPECT_EQ(s.chunks.back()["choices"], Json::array()) << "the usage chunk comes last";

  body.erase("stream");
  body.erase("stream_options");
  body["stop"] = stop;
  RawReply whole = post(server, "/v1/completions", body);
  Json reply = Json::parse(whole.body);
  EXPECT_EQ(reply["choices"][0]["text"], full.substr(0, at));
  EXPECT_EQ(reply["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(reply["usage"]["completion_tokens"], end_token + 1);

  // Both finished as "stop" in the engine, and every KV block is free.
  HttpReply metrics = http_get(server.url("/metrics"));
  EXPECT_NE(metrics.body.find("vllm:request_success_total{model_name=\"fake-model\",engine=\"0\","
                              "finished_reason=\"stop\"} 2"),
            std::string::npos)
      << metrics.body;
  EXPECT_EQ(metric_value(metrics.body, "gpufrac:kv_cache_blocks_used"), 0);
}

TEST(TextServer, TextHeldForAPossibleStopIsReleased) {
  FakeServer server(text_setup());
  const std::string prompt = "In a hole in the ground";
  Stream ref = reference_run(server, prompt, 30);
  const size_t k = two_texts_from(ref, 4);
  // Starts like chunks k, k + 1 but goes on differently: held, then released.
  Json body = completion_body(prompt, 30, true);
  body["stop"] = ref.texts[k] + ref.texts[k + 1] + "\u2603 not generated";
  Stream s = read_stream(post(server, "/v1/completions", body));
  EXPECT_EQ(joined(s.texts), joined(ref.texts));
  EXPECT_EQ(s.finish_reason, "length");
  EXPECT_EQ(s.ids, ref.ids);
  EXPECT_NE(s.texts[k + 1], ref.texts[k + 1]) << "chunk k + 1 held the possible stop";
  // A possible stop at the very end is released with the last chunk.
  body["stop"] = ref.texts.back() + "\u2603 not generated";
  Stream end = read_stream(post(server, "/v1/completions", body));
  EXPECT_EQ(joined(end.texts), joined(ref.texts));
  EXPECT_EQ(end.finish_reason, "length");
  EXPECT_NE(end.texts.back().find(ref.texts.back()), std::string::npos);
}

Json chat_body(int max_tokens, bool stream, bool include_usage = false) {
  Json body = {{"model", "fake-model"},
               {"messages",
                {{{"role", "system"}, {"content", "Be brief."}},
                 {{"role", "user"}, {"content", "Hello there!"}}}},
               {"max_tokens", max_tokens},
               {"seed", 11}};
  if (stream) body["stream"] = true;
  if (include_usage) body["stream_options"] = {{"include_usage", true}};
  return body;
}

TEST(TextServer, ChatStreamingChunkLayout) {
  FakeServer server(text_setup());
  Stream s = read_stream(post(server, "/v1/chat/completions", chat_body(24, true, true)));
  ASSERT_GE(s.chunks.size(), 3u);
  const std::string id = s.chunks[0]["id"];
  EXPECT_EQ(id.rfind("chatcmpl-", 0), 0u);
  for (const Json& chunk : s.chunks) {
    EXPECT_EQ(chunk["id"], id);
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    EXPECT_EQ(chunk["model"], "fake-model");
    EXPECT_TRUE(chunk["created"].is_number_integer());
    ASSERT_TRUE(chunk.contains("usage")) << "include_usage: every chunk has usage";
  }
  // First: the role, with empty content.
  EXPECT_EQ(s.chunks[0]["choices"][0]["delta"],
            Json::parse(R"({"role":"assistant","content":""})"));
  EXPECT_TRUE(s.chunks[0]["usage"].is_null());
  // Then content deltas (never empty) up to the finish chunk, then the usage chunk.
  const size_t last = s.chunks.size() - 1;
  for (size_t i = 1; i < last - 1; ++i) {
    const Json& choice = s.chunks[i]["choices"][0];
    EXPECT_FALSE(choice["delta"]["content"].get<std::string>().empty());
    EXPECT_FALSE(choice["delta"].contains("role"));
    EXPECT_TRUE(choice["finish_reason"].is_null());
    EXPECT_TRUE(s.chunks[i]["usage"].is_null());
  }
  EXPECT_EQ(s.chunks[last - 1]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(s.chunks[last]["choices"], Json::array());
  // The prompt is what /tokenize says for the same messages.
  Json tokenize = {{"model", "fake-model"}, {"messages", chat_body(1, false)["messages"]}};
  Json count = Json::parse(post(server, "/tokenize", tokenize).body);
  EXPECT_EQ(s.usage["prompt_tokens"], count["count"]);
  EXPECT_EQ(s.usage["completion_tokens"], 24);
  EXPECT_EQ(s.usage["total_tokens"], count["count"].get<int>() + 24);

  // Not streamed: the same content (same seed) as one message.
  RawReply whole = post(server, "/v1/chat/completions", chat_body(24, false));
  ASSERT_EQ(whole.status, 200) << whole.body;
  Json reply = Json::parse(whole.body);
  EXPECT_EQ(reply["object"], "chat.completion");
  EXPECT_EQ(reply["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(reply["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(reply["choices"][0]["message"]["content"], joined(s.texts));
  EXPECT_EQ(reply["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(reply["usage"], s.usage);

  // Without include_usage: no usage anywhere.
  Stream plain = read_stream(post(server, "/v1/chat/completions", chat_body(5, true)));
  for (const Json& chunk : plain.chunks) EXPECT_FALSE(chunk.contains("usage"));
  EXPECT_EQ(plain.finish_reason, "length");
}

TEST(TextServer, EndOfTurnTokenStopsChatAndLeavesNoText) {
  // The fake's EOS is its last id: with 151646 ids that is <|im_end|> (151645).
  ServerSetup setup = text_setup(151646);
  setup.runner.eos_one_in = 6;
  FakeServer server(setup);
  int stopped = 0;
  for (int seed = 0; seed < 6; ++seed) {
    Json body = chat_body(60, true, true);
    body["seed"] = seed;
    Stream s = read_stream(post(server, "/v1/chat/completions", body));
    EXPECT_EQ(joined(s.texts).find("<|im_end|>"), std::string::npos);
    if (s.finish_reason == "stop") {
      ++stopped;
      EXPECT_LT(s.usage["completion_tokens"].get<int>(), 60);
      // The finish chunk of an EOS adds no text: an empty delta.
      EXPECT_EQ(s.chunks[s.chunks.size() - 2]["choices"][0]["delta"], Json::object());
    }
  }
  EXPECT_GT(stopped, 0);
  Json ignoring = chat_body(60, false);
  ignoring["ignore_eos"] = true;
  Json reply = Json::parse(post(server, "/v1/chat/completions", ignoring).body);
  EXPECT_EQ(reply["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(reply["usage"]["completion_tokens"], 60);
}

// The FakeRunner makes up logprobs (fake_runner.h: the sampled token at -0.5, its top k the ids
// token, token + 1, ... at -0.5, -1.5, ...), so the layouts can be checked exactly.
TEST(TextServer, LogprobsInTheCompletionsAndChatLayouts) {
  FakeServer server(text_setup());
  const engine::Tokenizer& tokenizer = *served_qwen3().get();
  auto text_of = [&](int32_t id) { return tokenizer.decode(std::vector<int32_t>{id}, false); };
  Json body = completion_body("Logprobs, please", 12, false);
  body["temperature"] = 1;
  body["seed"] = 3;
  body["logprobs"] = 2;
  Json whole = Json::parse(post(server, "/v1/completions", body).body)["choices"][0];
  const Json& lp = whole["logprobs"];
  const std::vector<int32_t> ids = whole["token_ids"];
  ASSERT_EQ(ids.size(), 12u);
  ASSERT_EQ(lp["tokens"].size(), 12u);
  size_t offset = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string text = text_of(ids[i]);
    EXPECT_EQ(lp["tokens"][i], text);
    EXPECT_EQ(lp["token_logprobs"][i], -0.5);
    EXPECT_EQ(lp["text_offset"][i], offset);
    for (unsigned char c : text) offset += (c & 0xC0) != 0x80;  // characters, not bytes
    const Json& top = lp["top_logprobs"][i];
    EXPECT_EQ(top[text], -0.5) << "the sampled token is among its top logprobs";
    EXPECT_EQ(top[text_of((ids[i] + 1) % kQwen3VocabSize)], -1.5);
    EXPECT_LE(top.size(), 2u);
  }
  // Streamed: each chunk carries its token's logprobs, the offsets running on.
  body["stream"] = true;
  Stream s = read_stream(post(server, "/v1/completions", body));
  ASSERT_EQ(s.chunks.size(), 12u);
  for (size_t i = 0; i < s.chunks.size(); ++i) {
    const Json& chunk = s.chunks[i]["choices"][0]["logprobs"];
    EXPECT_EQ(chunk["tokens"], Json::array({lp["tokens"][i]}));
    EXPECT_EQ(chunk["top_logprobs"], Json::array({lp["top_logprobs"][i]}));
    EXPECT_EQ(chunk["text_offset"], Json::array({lp["text_offset"][i]}));
  }

  Json chat = chat_body(10, false);
  chat["logprobs"] = true;
  chat["top_logprobs"] = 2;
  Json reply = Json::parse(post(server, "/v1/chat/completions", chat).body);
  const Json& content = reply["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 10u);
  for (const Json& entry : content) {
    EXPECT_EQ(entry["logprob"], -0.5);
    ASSERT_TRUE(entry["bytes"].is_array());
    std::string bytes;
    for (int b : entry["bytes"]) bytes += char(b);
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(bytes), false), entry["token"].get<std::string>())
        << "bytes and token text describe one token";
    ASSERT_EQ(entry["top_logprobs"].size(), 2u);
    EXPECT_EQ(entry["top_logprobs"][0]["token"], entry["token"]);
    EXPECT_EQ(entry["top_logprobs"][0]["bytes"], entry["bytes"]);
    EXPECT_EQ(entry["top_logprobs"][1]["logprob"], -1.5);
  }
  // Streamed chat: the entries of the chunks together are the whole list, in order.
  chat["stream"] = true;
  Stream c = read_stream(post(server, "/v1/chat/completions", chat));
  EXPECT_TRUE(c.chunks[0]["choices"][0]["logprobs"].is_null()) << "the role chunk has none";
  Json streamed = Json::array();
  for (const Json& chunk : c.chunks) {
    const Json& l = chunk["choices"][0]["logprobs"];
    if (l.is_null()) continue;
    for (const Json& entry : l["content"]) streamed.push_back(entry);
  }
  EXPECT_EQ(streamed, content);
  // Not asked for: null.
  EXPECT_TRUE(
      Json::parse(
          post(server, "/v1/chat/completions", chat_body(3, false)).body)["choices"][0]["logprobs"]
          .is_null());
}

// n choices: streamed, every chunk carries one choice under its index (chat: a role chunk and a
// finish chunk per choice); not streamed, the choices in index order with the same texts; usage
// sums the choices.
TEST(TextServer, NChoicesStreamedByIndexAndListedInOrder) {
  FakeServer server(text_setup());
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    const bool chat = std::string(path) == "/v1/chat/completions";
    Json body = chat ? chat_body(9, false) : completion_body("Three tales", 9, false);
    body["temperature"] = 1;
    body["seed"] = 21;
    body["n"] = 3;
    body["ignore_eos"] = true;
    Json whole = Json::parse(post(server, path, body).body);
    ASSERT_EQ(whole["choices"].size(), 3u) << whole.dump();
    EXPECT_EQ(whole["usage"]["completion_tokens"], 27);
    std::vector<std::string> texts;
    for (int i = 0; i < 3; ++i) {
      const Json& choice = whole["choices"][i];
      EXPECT_EQ(choice["index"], i);
      EXPECT_EQ(choice["finish_reason"], "length");
      texts.push_back(chat ? choice["message"]["content"] : choice["text"]);
    }
    EXPECT_NE(texts[0], texts[1]) << "choices draw with their own seeds";

    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    RawReply reply = post(server, path, body);
    std::vector<std::string> streamed(3);
    std::vector<int> roles(3, 0), finishes(3, 0);
    Json usage;
    for (const std::string& event : sse_data(reply.body)) {
      if (event == "[DONE]") continue;
      Json chunk = Json::parse(event);
      if (chunk["choices"].empty()) {
        usage = chunk["usage"];
        continue;
      }
      ASSERT_EQ(chunk["choices"].size(), 1u);
      const Json& choice = chunk["choices"][0];
      const int index = choice["index"];
      ASSERT_TRUE(index >= 0 && index < 3) << event;
      EXPECT_EQ(finishes[size_t(index)], 0) << "a chunk after its choice's finish";
      if (chat) {
        roles[size_t(index)] += choice["delta"].contains("role");
        streamed[size_t(index)] += choice["delta"].value("content", "");
      } else {
        streamed[size_t(index)] += choice["text"].get<std::string>();
      }
      finishes[size_t(index)] += choice["finish_reason"].is_string();
    }
    EXPECT_EQ(streamed, texts) << path;
    EXPECT_EQ(finishes, std::vector<int>(3, 1));
    if (chat) {
      EXPECT_EQ(roles, std::vector<int>(3, 1));
    }
    EXPECT_EQ(usage["completion_tokens"], 27);
  }
}

TEST(TextServer, EchoStartsEveryChoiceWithThePrompt) {
  FakeServer server(text_setup());
  const std::string prompt = "Echo me, then go on:";
  Json body = completion_body(prompt, 6, false);
  Json plain = Json::parse(post(server, "/v1/completions", body).body)["choices"][0];
  body["echo"] = true;
  body["n"] = 2;
  Json whole = Json::parse(post(server, "/v1/completions", body).body);
  ASSERT_EQ(whole["choices"].size(), 2u);
  for (const Json& choice : whole["choices"]) {
    EXPECT_EQ(choice["text"], prompt + plain["text"].get<std::string>());
    EXPECT_EQ(choice["token_ids"], plain["token_ids"]) << "token_ids stay the generated ones";
  }
  body["stream"] = true;
  body["n"] = 1;
  Stream s = read_stream(post(server, "/v1/completions", body));
  ASSERT_EQ(s.texts.size(), 6u);
  EXPECT_EQ(s.texts[0].rfind(prompt, 0), 0u) << "the first chunk carries the prompt";
  EXPECT_EQ(joined(s.texts), prompt + plain["text"].get<std::string>());
}

TEST(TextServer, TokenizeAndDetokenizeRoundTrip) {
  FakeServer server(text_setup());
  const std::string text = "Grüße, 世界! 😀 <|im_start|> x  \n\t y";
  RawReply t = post(server, "/tokenize", {{"model", "fake-model"}, {"prompt", text}});
  ASSERT_EQ(t.status, 200) << t.body;
  EXPECT_EQ(t.content_type, "application/json");
  Json tokens = Json::parse(t.body);
  EXPECT_EQ(tokens["max_model_len"], 512);
  EXPECT_EQ(tokens["count"], tokens["tokens"].size());
  RawReply d = post(server, "/detokenize", {{"model", "fake-model"}, {"tokens", tokens["tokens"]}});
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(Json::parse(d.body)["prompt"], text);
  // The count is the prompt_tokens of a completion with that text.
  Json body = completion_body(text, 2, false);
  EXPECT_EQ(Json::parse(post(server, "/v1/completions", body).body)["usage"]["prompt_tokens"],
            tokens["count"]);
}

void expect_openai_error(const RawReply& r, int status, const std::string& param,
                         const std::string& says) {
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  Json body = Json::parse(r.body, nullptr, false);
  ASSERT_TRUE(body.is_object() && body.contains("error")) << r.body;
  const Json& e = body["error"];
  EXPECT_NE(e["message"].get<std::string>().find(says), std::string::npos) << r.body;
  EXPECT_TRUE(e["type"].is_string()) << r.body;
  EXPECT_EQ(e["param"], param.empty() ? Json(nullptr) : Json(param)) << r.body;
  EXPECT_TRUE(e.contains("code"));
}

TEST(TextServer, EveryTextErrorAnswersOpenAiStyleAndServingGoesOn) {
  FakeServer server(text_setup());
  auto raw = [&](const std::string& path, const std::string& body) {
    return http_exchange(server.port(), http_post(path, body));
  };
  expect_openai_error(raw("/v1/chat/completions", "{\"messages\": ["), 400, "", "not valid JSON");
  expect_openai_error(raw("/v1/chat/completions", R"({"model":"gpt-4o","messages":[]})"), 404,
                      "model", "does not exist");
  expect_openai_error(
      raw("/v1/chat/completions", R"({"messages":[{"role":"robot","content":"x"}]})"), 400,
      "messages", "role");
  expect_openai_error(
      raw("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"stop":7})"), 400,
      "stop", "string");
  expect_openai_error(raw("/v1/completions", R"({"prompt":"x","stop":["a",null]})"), 400, "stop",
                      "stop[1]");
  expect_openai_error(raw("/v1/completions", R"({"prompt":["a","b"]})"), 400, "prompt",
                      "one prompt");
  expect_openai_error(raw("/tokenize", R"({"prompt":["a"]})"), 400, "prompt", "string");
  expect_openai_error(raw("/tokenize", "[]"), 400, "", "JSON object");
  expect_openai_error(raw("/detokenize", R"({"tokens":[151936]})"), 400, "tokens",
                      "outside the vocabulary");
  expect_openai_error(raw("/detokenize", R"({"tokens":[[1]]})"), 400, "tokens", "integer token id");
  expect_openai_error(http_exchange(server.port(), "GET /tokenize HTTP/1.1\r\nHost: x\r\n\r\n"),
                      405, "", "");
  EXPECT_EQ(post(server, "/v1/chat/completions", chat_body(2, false)).status, 200);
  EXPECT_EQ(scrape(server.port(), "gpufrac:kv_cache_blocks_used"), 0);
}

TEST(TextServer, WithoutATokenizerTextEndpointsNameTheFix) {
  ServerSetup setup = text_setup();
  setup.tokenizer = &served_nothing();
  FakeServer server(setup);
  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}]})"},
           {"/v1/completions", R"({"prompt":"Hello"})"},
           {"/v1/completions", R"({"prompt":[1,2],"stop":"x"})"},
           {"/tokenize", R"({"prompt":"Hello"})"},
           {"/detokenize", R"({"tokens":[1]})"}}) {
    RawReply r = http_exchange(server.port(), http_post(path, body));
    EXPECT_EQ(r.status, 400) << path;
    EXPECT_NE(r.body.find("scripts/install-deps"), std::string::npos) << path << ": " << r.body;
  }
  // Token ids still work; their text is the ids.
  Json body = completion_body("x", 3, false);
  body["prompt"] = {5, 6};
  RawReply ids = post(server, "/v1/completions", body);
  ASSERT_EQ(ids.status, 200) << ids.body;
  Json choice = Json::parse(ids.body)["choices"][0];
  std::string text;
  for (int id : choice["token_ids"]) text += " " + std::to_string(id);
  EXPECT_EQ(choice["text"], text);
}

}  // namespace
}  // namespace gpufrac::testing
