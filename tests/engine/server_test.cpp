// The OpenAI server over real sockets, on a fake runner: response formats (non-streaming, SSE,
// usage chunk, [DONE]), cancel on disconnect (blocks freed), every error path's status and body,
// and many concurrent clients.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "common/json.h"
#include "server_test_client.h"
#include "server_test_fixture.h"

namespace gpufrac::testing {
namespace {

using namespace std::chrono_literals;

std::string completion_body(int max_tokens, bool stream, bool include_usage = false,
                            std::string prompt = "[1,2,3,4,5]") {
  std::string body = R"({"model":"fake-model","prompt":)" + prompt +
                     R"(,"temperature":0,"max_tokens":)" + std::to_string(max_tokens);
  if (stream) body += R"(,"stream":true)";
  if (include_usage) body += R"(,"stream_options":{"include_usage":true})";
  return body + "}";
}

// Polls until `name` in /metrics equals `value` (true) or 10 s pass (false).
bool metric_reaches(int port, const std::string& name, double value) {
  for (int i = 0; i < 1000; ++i) {
    if (scrape(port, name) == value) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

void expect_openai_error(const RawReply& r, int status, const std::string& says) {
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  Json body = Json::parse(r.body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << r.body;
  ASSERT_TRUE(body.contains("error")) << r.body;
  const Json& e = body["error"];
  ASSERT_TRUE(e["message"].is_string());
  EXPECT_NE(e["message"].get<std::string>().find(says), std::string::npos) << r.body;
  EXPECT_TRUE(e["type"].is_string());
  EXPECT_TRUE(e.contains("param"));
  EXPECT_TRUE(e.contains("code"));
}

TEST(Server, NonStreamingCompletion) {
  FakeServer server;
  RawReply r = http_exchange(server.port(), http_post("/v1/completions", completion_body(7, false)));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  Json body = Json::parse(r.body);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], "fake-model");
  EXPECT_EQ(body["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  ASSERT_EQ(body["choices"].size(), 1u);
  const Json& choice = body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "length");
  ASSERT_EQ(choice["token_ids"].size(), 7u);
  std::string text;
  for (int id : choice["token_ids"]) text += " " + std::to_string(id);
  EXPECT_EQ(choice["text"], text);
  EXPECT_EQ(body["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(body["usage"]["completion_tokens"], 7);
  EXPECT_EQ(body["usage"]["total_tokens"], 12);
}

TEST(Server, StreamingChunksThenDone) {
  FakeServer server;
  RawReply plain = http_exchange(server.port(), http_post("/v1/completions", completion_body(6, false)));
  RawReply r = http_exchange(server.port(), http_post("/v1/completions", completion_body(6, true)));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/event-stream");
  std::vector<std::string> events = sse_data(r.body);
  ASSERT_EQ(events.size(), 7u) << r.body;  // 6 tokens + [DONE]
  EXPECT_EQ(events.back(), "[DONE]");
  Json streamed_ids = Json::array();
  for (size_t i = 0; i < 6; ++i) {
    Json chunk = Json::parse(events[i]);
    EXPECT_EQ(chunk["object"], "text_completion");
    EXPECT_EQ(chunk["model"], "fake-model");
    EXPECT_FALSE(chunk.contains("usage")) << "no usage without include_usage";
    const Json& choice = chunk["choices"][0];
    ASSERT_EQ(choice["token_ids"].size(), 1u);
    EXPECT_EQ(choice["text"], " " + std::to_string(choice["token_ids"][0].get<int>()));
    EXPECT_EQ(choice["finish_reason"], i == 5 ? Json("length") : Json(nullptr));
    streamed_ids.push_back(choice["token_ids"][0]);
  }
  EXPECT_EQ(streamed_ids, Json::parse(plain.body)["choices"][0]["token_ids"]) << "greedy";
}

TEST(Server, StreamingUsageChunk) {
  FakeServer server;
  RawReply r = http_exchange(server.port(), http_post("/v1/completions", completion_body(3, true, true)));
  std::vector<std::string> events = sse_data(r.body);
  ASSERT_EQ(events.size(), 5u) << r.body;  // 3 tokens, usage, [DONE]
  for (int i = 0; i < 3; ++i) {
    Json chunk = Json::parse(events[i]);
    ASSERT_TRUE(chunk.contains("usage"));
    EXPECT_TRUE(chunk["usage"].is_null());
  }
  Json usage = Json::parse(events[3]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(usage["usage"]["completion_tokens"], 3);
  EXPECT_EQ(usage["usage"]["total_tokens"], 8);
  EXPECT_EQ(events[4], "[DONE]");
}

// The ids and the usage of a streamed completion.
struct StreamedRun {
  Json ids = Json::array();
  Json usage;
  std::string finish_reason;
};
StreamedRun streamed_run(int port, const std::string& body) {
  RawReply r = http_exchange(port, http_post("/v1/completions", body));
  StreamedRun run;
  for (const std::string& event : sse_data(r.body)) {
    if (event == "[DONE]") continue;
    Json chunk = Json::parse(event);
    if (chunk["choices"].empty()) {
      run.usage = chunk["usage"];
      continue;
    }
    run.ids.push_back(chunk["choices"][0]["token_ids"][0]);
    if (chunk["choices"][0]["finish_reason"].is_string())
      run.finish_reason = chunk["choices"][0]["finish_reason"];
  }
  return run;
}

// A request sent again with the ids its interrupted run had delivered (resume_token_ids) answers
// with the rest of that run: the same ids, greedy and seeded alike (the fake runner's draws
// depend on seed and draw number), and the usage of the whole run.
TEST(Server, AResumedRequestAnswersTheRestOfTheInterruptedRun) {
  FakeServer server;
  for (const char* sampling : {R"("temperature":0)", R"("temperature":1,"seed":7)"}) {
    std::string head =
        std::string(R"({"prompt":[1,2,3,4,5],)") + sampling +
        R"(,"max_tokens":10,"min_tokens":10,"stream":true,"stream_options":{"include_usage":true})";
    StreamedRun whole = streamed_run(server.port(), head + "}");
    ASSERT_EQ(whole.ids.size(), 10u) << sampling;
    Json delivered(whole.ids.begin(), whole.ids.begin() + 4);
    StreamedRun rest =
        streamed_run(server.port(), head + R"(,"resume_token_ids":)" + delivered.dump() + "}");
    EXPECT_EQ(rest.ids, Json(whole.ids.begin() + 4, whole.ids.end())) << sampling;
    EXPECT_EQ(rest.usage, whole.usage) << sampling;
    EXPECT_EQ(rest.finish_reason, "length");
  }
  RawReply nothing_left = http_exchange(
      server.port(),
      http_post("/v1/completions", R"({"prompt":[1],"max_tokens":2,"resume_token_ids":[3,4]})"));
  EXPECT_EQ(nothing_left.status, 400);
  EXPECT_NE(nothing_left.body.find("resume_token_ids"), std::string::npos) << nothing_left.body;
}

TEST(Server, EosStopsWithFinishReasonStop) {
  ServerSetup setup;
  setup.runner.eos_one_in = 1;
  FakeServer server(setup);
  RawReply r = http_exchange(server.port(),
                        http_post("/v1/completions", R"({"prompt":[1,2],"max_tokens":9,"min_tokens":2})"));
  Json choice = Json::parse(r.body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_EQ(choice["token_ids"].size(), 3u);
  EXPECT_EQ(choice["token_ids"].back(), server.runner().eos_token());
}

TEST(Server, ClientDisconnectCancelsAndFreesBlocks) {
  ServerSetup setup;
  setup.runner.step_time = 3ms;
  FakeServer server(setup);
  // Streaming: leave after the second chunk.
  RawReply partial = http_exchange(server.port(), http_post("/v1/completions", completion_body(100, true)),
                              20, "\"token_ids\":[");
  EXPECT_FALSE(partial.complete);
  EXPECT_TRUE(metric_reaches(server.port(), "gpufrac:kv_cache_blocks_used", 0));
  EXPECT_TRUE(metric_reaches(server.port(), "vllm:num_requests_running", 0));
  // Not streaming: leave before any answer.
  int fd = connect_local(server.port());
  std::string request = http_post("/v1/completions", completion_body(100, false));
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), ssize_t(request.size()));
  std::this_thread::sleep_for(30ms);
  ::close(fd);
  EXPECT_TRUE(metric_reaches(server.port(), "gpufrac:kv_cache_blocks_used", 0));
  HttpReply metrics = http_get(server.url("/metrics"));
  EXPECT_NE(metrics.body.find("vllm:request_success_total{model_name=\"fake-model\",engine=\"0\","
                              "finished_reason=\"abort\"} 2"),
            std::string::npos)
      << metrics.body;
  // Everyone else is still served.
  EXPECT_EQ(http_exchange(server.port(), http_post("/v1/completions", completion_body(2, false))).status,
            200);
}

TEST(Server, EveryErrorPathAnswersOpenAiStyleAndServingGoesOn) {
  ServerSetup setup;
  setup.max_body_bytes = 4096;
  setup.max_model_len = 32;
  FakeServer server(setup);
  int port = server.port();
  auto post = [&](const std::string& body) {
    return http_exchange(port, http_post("/v1/completions", body));
  };
  expect_openai_error(post("{\"prompt\": [1,2"), 400, "not valid JSON");
  expect_openai_error(post(R"({"prompt":[1],"max_tokens":"many"})"), 400, "integer");
  expect_openai_error(post(R"({"prompt":"Hello"})"), 400, "tokenizer");
  expect_openai_error(post(R"({"model":"gpt-4","prompt":[1]})"), 404, "does not exist");
  expect_openai_error(post(R"({"prompt":[1000]})"), 400, "outside the vocabulary");
  expect_openai_error(post(R"({"prompt":[1,2,3],"max_tokens":30})"), 400, "maximum context length");
  expect_openai_error(post(R"({"prompt":[1],"n":300})"), 400, "n");
  std::string big = R"({"prompt":[)" + std::string(5000, '1') + "]}";
  expect_openai_error(post(big), 413, "");
  expect_openai_error(http_exchange(port, "GET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n"), 404, "");
  expect_openai_error(http_exchange(port, "GET /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n"), 405, "");
  expect_openai_error(http_exchange(port, "BLAH\r\n\r\n"), 400, "");
  expect_openai_error(http_exchange(port, http_post("/v1/chat/completions", "{}")), 400, "tokenizer");
  RawReply ok = post(completion_body(3, false, false, "[1,2]"));
  EXPECT_EQ(ok.status, 200) << ok.body;
}

TEST(Server, FullWaitingQueueAnswers429) {
  std::mutex gate;
  gate.lock();
  ServerSetup setup;
  setup.max_num_seqs = 1;
  setup.max_waiting_requests = 2;
  setup.runner.on_step = [&](const engine::StepBatch&) { std::lock_guard hold(gate); };
  FakeServer server(setup);
  std::vector<std::thread> clients;
  std::atomic<int> ok{0}, refused{0};
  for (int i = 0; i < 3; ++i) {  // one runs (blocked in its step), two wait
    clients.emplace_back([&] {
      RawReply r = http_exchange(server.port(), http_post("/v1/completions", completion_body(2, false)));
      (r.status == 200 ? ok : refused)++;
    });
    std::this_thread::sleep_for(50ms);
  }
  RawReply extra = http_exchange(server.port(), http_post("/v1/completions", completion_body(2, false)));
  expect_openai_error(extra, 429, "too many requests");
  gate.unlock();
  for (auto& c : clients) c.join();
  EXPECT_EQ(ok.load(), 3);
  EXPECT_EQ(refused.load(), 0);
  EXPECT_EQ(scrape(server.port(), "gpufrac:num_requests_rejected_total"), 1);
}

TEST(Server, ModelsHealthAndMetrics) {
  FakeServer server;
  HttpReply models = http_get(server.url("/v1/models"));
  ASSERT_EQ(models.status, 200);
  Json m = Json::parse(models.body);
  EXPECT_EQ(m["object"], "list");
  EXPECT_EQ(m["data"][0]["id"], "fake-model");
  EXPECT_EQ(m["data"][0]["max_model_len"], 128);
  EXPECT_EQ(http_get(server.url("/health")).status, 200);
  http_exchange(server.port(), http_post("/v1/completions", completion_body(4, true)));
  HttpReply metrics = http_get(server.url("/metrics"));
  ASSERT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.content_type.rfind("text/plain", 0), 0u);
  for (const char* name :
       {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
        "gpufrac:kv_cache_blocks_used", "gpufrac:kv_cache_blocks_capacity",
        "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
        "vllm:time_to_first_token_seconds_count", "vllm:inter_token_latency_seconds_count",
        "vllm:e2e_request_latency_seconds_count"}) {
    EXPECT_GE(metric_value(metrics.body, name), 0) << name;
  }
  EXPECT_EQ(metric_value(metrics.body, "gpufrac:kv_cache_blocks_capacity"), 256);
  EXPECT_EQ(metric_value(metrics.body, "vllm:prompt_tokens_total"), 5);
  EXPECT_EQ(metric_value(metrics.body, "vllm:generation_tokens_total"), 4);
  EXPECT_EQ(metric_value(metrics.body, "vllm:time_to_first_token_seconds_count"), 1);
  EXPECT_EQ(metric_value(metrics.body, "vllm:inter_token_latency_seconds_count"), 3);
  EXPECT_EQ(metric_value(metrics.body, "gpufrac:inter_token_latency_seconds_count"), 3);
  EXPECT_NE(metrics.body.find("vllm:time_to_first_token_seconds_bucket{model_name=\"fake-model\","
                              "engine=\"0\",le=\"+Inf\"} 1"),
            std::string::npos);
}

// 96 concurrent streaming clients on a KV pool too small for all of them (preemptions happen);
// each gets exactly its greedy tokens, and every block is free afterwards.
TEST(Server, ManyConcurrentClientsUnderKvPressure) {
  ServerSetup setup;
  setup.num_kv_blocks = 80;  // 320 token slots for up to 96 x ~40 tokens
  setup.kv_admission = engine::KvAdmission::kOptimistic;  // so that preemptions happen
  setup.max_num_seqs = 48;
  setup.max_num_batched_tokens = 64;
  setup.runner.step_time = 200us;
  FakeServer server(setup);
  auto prompt_of = [](int i) {
    std::string p = "[";
    for (int t = 0; t < 4 + i % 24; ++t) p += (t ? "," : "") + std::to_string((i * 31 + t) % 999);
    return p + "]";
  };
  std::vector<std::thread> clients;
  std::vector<Json> streamed(96);
  for (int i = 0; i < 96; ++i) {
    clients.emplace_back([&, i] {
      RawReply r = http_exchange(server.port(),
                            http_post("/v1/completions", completion_body(4 + i % 13, true, true,
                                                                         prompt_of(i))),
                            60);
      std::vector<std::string> events = sse_data(r.body);
      Json ids = Json::array();
      for (const std::string& e : events) {
        if (e == "[DONE]") break;
        Json chunk = Json::parse(e);
        if (!chunk["choices"].empty()) ids.push_back(chunk["choices"][0]["token_ids"][0]);
      }
      streamed[i] = ids;
    });
  }
  for (auto& c : clients) c.join();
  for (int i = 0; i < 96; ++i) {
    ASSERT_EQ(streamed[i].size(), size_t(4 + i % 13)) << "client " << i;
    RawReply alone = http_exchange(server.port(), http_post("/v1/completions",
                                                       completion_body(4 + i % 13, false, false,
                                                                       prompt_of(i))));
    EXPECT_EQ(streamed[i], Json::parse(alone.body)["choices"][0]["token_ids"]) << "client " << i;
  }
  EXPECT_GT(scrape(server.port(), "vllm:num_preemptions_total"), 0);
  EXPECT_TRUE(metric_reaches(server.port(), "gpufrac:kv_cache_blocks_used", 0));
  EXPECT_EQ(scrape(server.port(), "vllm:num_requests_running"), 0);
}

}  // namespace
}  // namespace gpufrac::testing
