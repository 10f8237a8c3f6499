// Who may call what on a whole CPU node: models A (key ka, in the spec) and B (key kb, from an
// environment variable) and C (a key file) of fake engines (bench's scripted SSE server): ka on B
// is 403, ka on A 200, /v1/models with ka lists A only, no key 401; A at its
// max_requests_in_flight gets 429 while B serves normally; C over its requests_per_second gets
// 429. The engines get the node's internal key (RUN_DIR/engine-key, mode 0600) in their
// environment and never a client key. Then a node of the built-in engine (`gpufrac serve --model
// tiny`): the engine itself refuses a request without the internal key, or with a client's key,
// and the key is on no command line.
#include <sys/stat.h>

#include <thread>

#include "common/json.h"
#include "common/raw_http_exchange.h"
#include "fake_engine_spec.h"
#include "node/node.h"

namespace gpufrac {
namespace {

using testing::eventually;
using testing::RawReply;

RawReply call(int port, const std::string& method, const std::string& path, const std::string& body,
              const std::string& key) {
  std::string wire = method + " " + path + " HTTP/1.1\r\nHost: test\r\n";
  if (!key.empty()) wire += "Authorization: Bearer " + key + "\r\n";
  if (method == "POST") {
    wire +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  return testing::http_exchange(port, wire + "\r\n" + body, 30);
}
std::string completion(const std::string& model, int max_tokens) {
  return Json{{"model", model}, {"prompt", "hello"}, {"max_tokens", max_tokens}, {"stream", true}}
      .dump();
}
RawReply complete(const Node& node, const std::string& model, const std::string& key,
                  int max_tokens = 2) {
  return call(node.port(), "POST", "/v1/completions", completion(model, max_tokens), key);
}
double router_metric(const Node& node, const std::string& sample) {
  RawReply reply = call(node.port(), "GET", "/metrics", "", "");
  size_t at = reply.body.find(sample + " ");
  return at == std::string::npos ? -1 : std::stod(reply.body.substr(at + sample.size() + 1));
}
pid_t pid_of(const Node& node, const std::string& name) {
  for (const InstanceStatus& s : node.instances()) {
    if (s.name == name) return s.process.pid;
  }
  return -1;
}

class NodeAccessTest : public ::testing::Test {
 protected:
  NodeSpec spec(const std::string& models) {
    // Three models at compute 0.3 need three cores of their own; a test machine may have two.
    return parse_node_spec(
        "name: access\nlisten: 127.0.0.1:0\ndevice: cpu\nstop_timeout: 3s\n"
        "oversubscribe_compute: true\nrun_dir: " +
            dir_.path() + "/run\nmodels:\n" + models,
        "spec.yaml");
  }
  testing::TempDir dir_;
};

TEST_F(NodeAccessTest, KeysPerModelAndLimitsThroughTheRouter) {
  testing::write_file(dir_.path() + "/c.keys", "# the keys of c\nkc\n");
  ::setenv("GFN_ACCESS_B_KEYS", "kb, shared", 1);
  std::unique_ptr<Node> node = Node::up(
      spec(testing::fake_model("a", "{compute: 0.3, memory: 0.1}", "", 20) +
           "    api_keys: [ka, shared]\n    max_requests_in_flight: 2\n" +
           testing::fake_model("b", "{compute: 0.3, memory: 0.1}") +
           "    api_keys_env: GFN_ACCESS_B_KEYS\n" +
           testing::fake_model("c", "{compute: 0.3, memory: 0.1}") +
           "    api_keys_file: " + dir_.path() + "/c.keys\n    requests_per_second: 0.5\n"));
  ::unsetenv("GFN_ACCESS_B_KEYS");

  // Keys.
  EXPECT_EQ(complete(*node, "a", "").status, 401);
  EXPECT_EQ(complete(*node, "a", "kb-not").status, 401);
  EXPECT_EQ(call(node->port(), "GET", "/v1/models", "", "").status, 401);
  EXPECT_EQ(call(node->port(), "GET", "/health", "", "").status, 200);
  RawReply forbidden = complete(*node, "b", "ka");
  EXPECT_EQ(forbidden.status, 403) << forbidden.body;
  RawReply ok = complete(*node, "a", "ka");
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_NE(ok.body.find("[DONE]"), std::string::npos);
  EXPECT_EQ(complete(*node, "b", "kb").status, 200);
  EXPECT_EQ(complete(*node, "b", "shared").status, 200);
  RawReply models = call(node->port(), "GET", "/v1/models", "", "ka");
  ASSERT_EQ(models.status, 200);
  Json data = Json::parse(models.body)["data"];
  ASSERT_EQ(data.size(), 1u) << models.body;
  EXPECT_EQ(data[0]["id"], "a");
  EXPECT_EQ(Json::parse(call(node->port(), "GET", "/v1/models", "", "shared").body)["data"].size(),
            2u);

  // A at its max_requests_in_flight (two streams of 100 tokens 20 ms apart): 429, B serves.
  std::vector<RawReply> streams(2);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < streams.size(); ++i)
    clients.emplace_back([&, i] { streams[i] = complete(*node, "a", "ka", 100); });
  ASSERT_TRUE(eventually(
      [&] { return router_metric(*node, "gpufrac:node_requests_in_flight{model=\"a\"}") == 2; },
      5));
  RawReply refused = complete(*node, "a", "ka");
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(refused.head.header("retry-after"), "1");
  RawReply b_meanwhile = complete(*node, "b", "kb", 4);
  EXPECT_EQ(b_meanwhile.status, 200);
  EXPECT_NE(b_meanwhile.body.find("[DONE]"), std::string::npos);
  EXPECT_EQ(router_metric(*node, "gpufrac:node_requests_in_flight{model=\"a\"}"), 2)
      << "b was answered while a's streams still ran";
  for (std::thread& c : clients) c.join();
  for (const RawReply& s : streams) {
    EXPECT_EQ(s.status, 200);
    EXPECT_NE(s.body.find("[DONE]"), std::string::npos);
  }
  EXPECT_EQ(complete(*node, "a", "ka").status, 200);

  // C at 0.5 requests per second: the second request at once is 429.
  EXPECT_EQ(complete(*node, "c", "kc").status, 200);
  RawReply too_fast = complete(*node, "c", "kc");
  EXPECT_EQ(too_fast.status, 429);
  EXPECT_FALSE(too_fast.head.header("retry-after").empty());
  EXPECT_EQ(complete(*node, "a", "ka").status, 200);

  // The engines hold the node's internal key, not the clients' keys.
  std::string key_file = node->run_dir() + "/engine-key";
  struct stat info {};
  ASSERT_EQ(::stat(key_file.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  std::string engine_key = testing::read_file(key_file);
  ASSERT_EQ(engine_key.size(), 65u);  // 64 hex digits and a newline
  engine_key.pop_back();
  pid_t b = pid_of(*node, "b");
  EXPECT_EQ(testing::proc_env(b, "GPUFRAC_API_KEY"), engine_key);
  EXPECT_EQ(testing::proc_env(b, "VLLM_API_KEY"), engine_key);
  EXPECT_EQ(testing::proc_env(b, "GFN_ACCESS_B_KEYS"), "<unset>");
  node->down();
}

TEST_F(NodeAccessTest, TheBuiltInEngineRefusesWhatDoesNotComeThroughTheRouter) {
  const char* bin = std::getenv("GPUFRAC_BIN");
  ASSERT_NE(bin, nullptr);
  NodeOptions options;
  options.gpufrac_binary = bin;
  std::unique_ptr<Node> node = Node::up(
      spec("  - {name: a, model: tiny, api_keys: [ka], engine_args: {max-model-len: 256, "
           "max-num-seqs: 4, memory-budget: 16M}, fraction: {compute: 0.5, memory: 0.25}}\n"),
      options);
  std::string engine_key = testing::read_file(node->run_dir() + "/engine-key");
  engine_key.pop_back();
  int engine_port = node->instances()[0].port;
  std::string body =
      Json{{"model", "a"}, {"prompt", Json::array({1, 2, 3})}, {"max_tokens", 2}}.dump();

  EXPECT_EQ(call(engine_port, "POST", "/v1/completions", body, "").status, 401);
  EXPECT_EQ(call(engine_port, "POST", "/v1/completions", body, "ka").status, 401);
  EXPECT_EQ(call(engine_port, "GET", "/v1/models", "", "").status, 401);
  EXPECT_EQ(call(engine_port, "GET", "/health", "", "").status, 200);
  EXPECT_EQ(call(engine_port, "POST", "/v1/completions", body, engine_key).status, 200);
  RawReply routed = call(node->port(), "POST", "/v1/completions", body, "ka");
  EXPECT_EQ(routed.status, 200) << routed.body;
  EXPECT_NE(routed.body.find("\"completion_tokens\":2"), std::string::npos) << routed.body;

  std::string cmdline =
      testing::read_file("/proc/" + std::to_string(pid_of(*node, "a")) + "/cmdline");
  EXPECT_NE(cmdline.find("serve"), std::string::npos);
  EXPECT_EQ(cmdline.find(engine_key), std::string::npos);
  node->down();
  EXPECT_EQ(testing::read_file(node->run_dir() + "/logs/a.log").find(engine_key),
            std::string::npos);
}

}  // namespace
}  // namespace gpufrac
