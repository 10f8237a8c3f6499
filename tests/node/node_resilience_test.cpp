// CPU nodes of the real engine (`gpufrac serve --model tiny`) whose engines are killed with
// SIGKILL under load: a stream cut mid-way is resumed and equals the uninterrupted run (greedy
// and seeded: ids, text, usage, one stream id); requests sent while the engine restarts wait and
// complete; a non-streamed request whose engine died is retried and gets the same answer; an
// engine whose port was taken after it died restarts on another port; and
// the issue's CPU scenario — two tiny models, c=4 each, ISL 64 / OSL 64, 120 requests per model
// through `gpufrac bench`, one engine killed twice — loses no request, the other model's
// latencies printed beside a run without kills.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <set>
#include <thread>

#include "common/clock.h"
#include "common/http_client.h"
#include "common/json.h"
#include "common/raw_http_exchange.h"
#include "node/node.h"
#include "node/process.h"
#include "node_test_util.h"

namespace gpufrac {
namespace {

using testing::eventually;

std::string gpufrac_bin() {
  const char* bin = std::getenv("GPUFRAC_BIN");
  return bin ? bin : "gpufrac";
}

std::string tiny_model(const std::string& name) {
  return "  - {name: " + name +
         ", model: tiny, engine_args: {max-model-len: 512, max-num-seqs: 8}, "
         "fraction: {compute: 0.5, memory: 0.25}}\n";
}

// A greedy completion of `n` tokens exactly, for a prompt of 16 ids from `first`.
Json completion(const std::string& model, int n, bool stream, int first = 100) {
  Json prompt = Json::array();
  for (int i = 0; i < 16; ++i) prompt.push_back(first + 37 * i);
  Json body = {{"model", model},     {"prompt", prompt}, {"max_tokens", n}, {"min_tokens", n},
               {"ignore_eos", true}, {"stream", stream}, {"temperature", 0}};
  if (stream) body["stream_options"] = {{"include_usage", true}};
  return body;
}

// What a client made of a stream: its ids, text, stream ids, finishes, usage, [DONE]s.
struct Streamed {
  Json ids = Json::array();
  std::string text;
  std::set<std::string> stream_ids;
  int finishes = 0, dones = 0;
  Json usage;
};
Streamed parse_stream(const std::string& body) {
  Streamed s;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    size_t end = body.find("\n\n", at);
    std::string data = body.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") {
      s.dones++;
      continue;
    }
    Json chunk = Json::parse(data);
    s.stream_ids.insert(chunk.value("id", ""));
    if (chunk["usage"].is_object()) s.usage = chunk["usage"];
    if (chunk["choices"].empty()) continue;
    const Json& choice = chunk["choices"][0];
    for (const Json& id : choice["token_ids"]) s.ids.push_back(id);
    s.text += choice["text"].get<std::string>();
    if (choice["finish_reason"].is_string()) s.finishes++;
  }
  return s;
}

double router_metric(const Node& node, const std::string& sample) {
  HttpReply reply = http_get(node.url() + "/metrics");
  size_t at = reply.body.find(sample + " ");
  return at == std::string::npos ? -1 : std::stod(reply.body.substr(at + sample.size() + 1));
}

class NodeResilienceTest : public ::testing::Test {
 protected:
  std::unique_ptr<Node> up(const std::string& models) {
    std::string yaml =
        "name: r\nlisten: 127.0.0.1:0\ndevice: cpu\nstop_timeout: 3s\nrun_dir: " + dir_.path() +
        "/run\nmodels:\n" + models;
    NodeOptions options;
    options.gpufrac_binary = gpufrac_bin();
    return Node::up(parse_node_spec(yaml, "spec.yaml"), options);
  }
  static InstanceStatus instance(const Node& node, const std::string& name) {
    for (const InstanceStatus& s : node.instances()) {
      if (s.name == name) return s;
    }
    return {};
  }
  // Kills the model's engine with SIGKILL and returns the restart count it must reach.
  static int kill_engine(const Node& node, const std::string& name) {
    InstanceStatus s = instance(node, name);
    EXPECT_EQ(::kill(s.process.pid, SIGKILL), 0);
    return s.restarts + 1;
  }
  static bool back(const Node& node, const std::string& name, int restarts) {
    return eventually(
        [&] {
          InstanceStatus s = instance(node, name);
          return s.state == InstanceState::kReady && s.restarts == restarts;
        },
        30);
  }
  testing::TempDir dir_;
};

TEST_F(NodeResilienceTest, AStreamCutByKillNineResumesAsTheUninterruptedRun) {
  std::unique_ptr<Node> node = up(tiny_model("a"));
  int resumed = 0;
  for (Json sampling : {Json{{"temperature", 0}}, Json{{"temperature", 0.8}, {"seed", 11}}}) {
    Json body = completion("a", 64, true);
    body.update(sampling);
    testing::RawReply whole =
        testing::stream_request(node->port(), "/v1/completions", body.dump(), 60);
    ASSERT_TRUE(whole.complete) << whole.error;
    Streamed reference = parse_stream(whole.body);
    ASSERT_EQ(reference.ids.size(), 64u) << whole.body;

    // The same request again, its engine killed once 10 tokens have reached the client.
    int restarts = 0;
    testing::RawReply cut = testing::http_exchange(
        node->port(), testing::http_post("/v1/completions", body.dump()), 60, "", false,
        [&](const std::string& so_far) {
          size_t tokens = 0;
          for (size_t at = 0; (at = so_far.find("token_ids", at)) != std::string::npos; ++at)
            tokens++;
          if (restarts == 0 && tokens >= 10) restarts = kill_engine(*node, "a");
        });
    ASSERT_GT(restarts, 0) << "the stream ended before the kill";
    ASSERT_TRUE(cut.complete) << cut.error << "\n" << cut.body;
    Streamed resumed_run = parse_stream(cut.body);
    EXPECT_EQ(resumed_run.ids, reference.ids) << sampling.dump();
    EXPECT_EQ(resumed_run.text, reference.text) << sampling.dump();
    EXPECT_EQ(resumed_run.usage, reference.usage) << sampling.dump();
    EXPECT_EQ(resumed_run.stream_ids.size(), 1u) << cut.body;
    EXPECT_EQ(resumed_run.finishes, 1);
    EXPECT_EQ(resumed_run.dones, 1);
    EXPECT_EQ(router_metric(*node, R"(gpufrac:node_resumed_streams_total{model="a"})"), ++resumed);
    ASSERT_TRUE(back(*node, "a", restarts));
  }
}

TEST_F(NodeResilienceTest, RequestsWaitThroughARestartAndACutReplyIsRetried) {
  std::unique_ptr<Node> node = up(tiny_model("a"));
  std::string url = node->url() + "/v1/completions";
  HttpReply reference = http_post_json(url, completion("a", 256, false).dump(), 60);
  ASSERT_EQ(reference.status, 200) << reference.body;
  Json reference_ids = Json::parse(reference.body)["choices"][0]["token_ids"];

  // Killed while idle: requests sent during the restart wait for it and complete.
  int restarts = kill_engine(*node, "a");
  ASSERT_TRUE(eventually([&] { return instance(*node, "a").state != InstanceState::kReady; }, 5));
  std::vector<HttpReply> replies(4);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < replies.size(); ++i) {
    clients.emplace_back(
        [&, i] { replies[i] = http_post_json(url, completion("a", 256, i % 2).dump(), 60); });
  }
  for (std::thread& c : clients) c.join();
  for (size_t i = 0; i < replies.size(); ++i) {
    EXPECT_EQ(replies[i].status, 200) << i << ": " << replies[i].body;
    if (i % 2 == 0) {  // not streamed: the whole answer
      EXPECT_EQ(Json::parse(replies[i].body)["choices"][0]["token_ids"], reference_ids);
    }
  }
  EXPECT_GE(router_metric(*node, R"(gpufrac:node_held_requests_total{model="a"})"), 1);
  ASSERT_TRUE(back(*node, "a", restarts));

  // Killed while it generates a non-streamed reply: nothing reached the client, so the request
  // is sent again and the client gets the whole, same answer.
  HttpReply retried;
  std::thread client(
      [&] { retried = http_post_json(url, completion("a", 256, false).dump(), 60); });
  std::string engine_metrics = instance(*node, "a").url + "/metrics";
  ASSERT_TRUE(eventually(
      [&] {
        return http_get(engine_metrics)
                   .body.find("vllm:num_requests_running{model_name=\"a\",engine=\"0\"} 1") !=
               std::string::npos;
      },
      10))
      << http_get(engine_metrics).body;
  restarts = kill_engine(*node, "a");
  client.join();
  EXPECT_EQ(retried.status, 200) << retried.body;
  EXPECT_EQ(Json::parse(retried.body)["choices"][0]["token_ids"], reference_ids);
  EXPECT_EQ(router_metric(*node, R"(gpufrac:node_retried_requests_total{model="a"})"), 1);
  EXPECT_TRUE(back(*node, "a", restarts));
}

// `gpufrac bench` at c=4 against both models, ISL 64 / OSL 64, 120 measured requests each;
// returns the run's summary.json. `during` runs beside it.
Json bench(const Node& node, const std::string& out, const std::function<void()>& during) {
  std::vector<std::string> argv = {gpufrac_bin(),
                                   "bench",
                                   "--target",
                                   node.url() + "=alpha",
                                   "--target",
                                   node.url() + "=beta",
                                   "--concurrency",
                                   "4",
                                   "--requests",
                                   "120",
                                   "--isl",
                                   "64",
                                   "--osl",
                                   "64",
                                   "--arm",
                                   "fractions",
                                   "--models-per-gpu",
                                   "2",
                                   "--no-progress",
                                   "--out",
                                   out};
  CommandOutput result;
  std::thread run([&] { result = run_command(argv, current_environment(), "", 600); });
  during();
  run.join();
  EXPECT_TRUE(result.ok()) << result.out << result.err;
  return Json::parse(testing::read_file(out + "/fractions-m2/c4/summary.json"));
}

const Json& target(const Json& summary, const std::string& model) {
  for (const Json& t : summary["targets"]) {
    if (t["model"] == model) return t["metrics"];
  }
  throw std::runtime_error("no target " + model);
}

// Another process (another node's engine) takes the port of an engine that died: the restart
// draws a fresh port, and the router follows it.
TEST_F(NodeResilienceTest, ARestartedEngineMovesOffAPortTakenAfterItDied) {
  std::unique_ptr<Node> node = up(tiny_model("a"));
  const int old_port = instance(*node, "a").port;
  int restarts = kill_engine(*node, "a");
  int taker = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(taker, 0);
  int on = 1;
  ::setsockopt(taker, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(uint16_t(old_port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // The dead engine's socket goes as the kernel reaps it: bind as soon as it has gone.
  ASSERT_TRUE(eventually(
      [&] {
        return ::bind(taker, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
               ::listen(taker, 4) == 0;
      },
      5));
  ASSERT_TRUE(back(*node, "a", restarts));
  EXPECT_NE(instance(*node, "a").port, old_port);
  HttpReply reply = http_post_json(node->url() + "/v1/completions",
                                   completion("a", 8, false).dump(), 60);
  EXPECT_EQ(reply.status, 200) << reply.body;
  ::close(taker);
}

TEST_F(NodeResilienceTest, TwoTinyModelsUnderBenchLoseNothingWhenOneEngineIsKilledTwice) {
  std::unique_ptr<Node> node = up(tiny_model("alpha") + tiny_model("beta"));
  Json calm = bench(*node, dir_.path() + "/calm", [] {});
  const std::string routed = R"(gpufrac:node_requests_total{model="alpha"})";
  double start = router_metric(*node, routed);
  std::vector<double> killed_at_s;
  Json killed = bench(*node, dir_.path() + "/killed", [&] {
    // Kill alpha's engine a third and two thirds into the run (by alpha's requests routed).
    int64_t t0 = monotonic_ns();
    for (double share : {1.0 / 3, 2.0 / 3}) {
      ASSERT_TRUE(
          eventually([&] { return router_metric(*node, routed) >= start + 128 * share; }, 120));
      int restarts = kill_engine(*node, "alpha");
      killed_at_s.push_back(double(monotonic_ns() - t0) / 1e9);
      ASSERT_TRUE(back(*node, "alpha", restarts));
    }
  });
  ASSERT_EQ(killed_at_s.size(), 2u);
  for (const char* model : {"alpha", "beta"}) {
    const Json& m = target(killed, model);
    EXPECT_EQ(m["completed"], 120) << model << ": " << m.dump();
    EXPECT_EQ(m["failed"], 0) << model;
    EXPECT_EQ(m["output_token_mismatches"], 0) << model;
    EXPECT_EQ(m["total_output_tokens"], 120 * 64) << model;
  }
  std::printf("alpha killed at %.1f s and %.1f s; resumed streams %g, retried %g, held %g\n",
              killed_at_s[0], killed_at_s[1],
              router_metric(*node, R"(gpufrac:node_resumed_streams_total{model="alpha"})"),
              router_metric(*node, R"(gpufrac:node_retried_requests_total{model="alpha"})"),
              router_metric(*node, R"(gpufrac:node_held_requests_total{model="alpha"})"));
  std::printf("%-6s %-8s %10s %10s %10s %10s %10s\n", "model", "run", "lat p50", "lat p99",
              "lat max", "ttft p50", "itl p50");
  for (const char* model : {"alpha", "beta"}) {
    for (auto [name, summary] : {std::pair{"no kill", &calm}, std::pair{"killed", &killed}}) {
      const Json& m = target(*summary, model);
      std::printf("%-6s %-8s %8.1f ms %8.1f ms %8.1f ms %8.1f ms %8.2f ms\n", model, name,
                  m["request_latency_ms"]["p50"].get<double>(),
                  m["request_latency_ms"]["p99"].get<double>(),
                  m["request_latency_ms"]["max"].get<double>(), m["ttft_ms"]["p50"].get<double>(),
                  m["itl_ms"]["p50"].get<double>());
    }
  }
}

}  // namespace
}  // namespace gpufrac
