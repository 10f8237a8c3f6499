// Whole CPU nodes with fake engines (bench's scripted SSE server): placement made real (pinned
// cores, memory limits), load through the router, supervision (kill -9: that model's requests
// wait in the router until it is back within 10 s, the other model's streams all complete),
// all-or-nothing startup, and down leaving nothing behind.
#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <thread>

#include "common/error.h"
#include "common/http_client.h"
#include "common/json.h"
#include "node/node.h"
#include "node/node_state.h"
#include "node/process.h"
#include "fake_engine_spec.h"
#include "common/raw_http_exchange.h"

namespace gpufrac {
namespace {

using testing::eventually;
using testing::fake_model;
using testing::stream_request;

class CpuNodeTest : public ::testing::Test {
 protected:
  NodeSpec spec(const std::string& models, const std::string& extra = "") {
    std::string yaml = "name: t\nlisten: 127.0.0.1:0\ndevice: cpu\nrun_dir: " + dir_.path() +
                       "/run\nstop_timeout: 3s\ndrain_timeout: 10s\n" + extra + "models:\n" + models;
    return parse_node_spec(yaml, "spec.yaml");
  }
  const InstanceStatus* find(const Node& node, const std::string& name, std::vector<InstanceStatus>& keep) {
    keep = node.instances();
    for (const InstanceStatus& s : keep) {
      if (s.name == name) return &s;
    }
    return nullptr;
  }
  std::string body(const std::string& model, int max_tokens) {
    return Json{{"model", model}, {"prompt", "hello"}, {"max_tokens", max_tokens}, {"stream", true}}.dump();
  }
  testing::TempDir dir_;
};

TEST_F(CpuNodeTest, TwoModelsAnswerLoadThroughTheRouter) {
  std::unique_ptr<Node> node = Node::up(
      spec(fake_model("a", "{compute: 0.5, memory: 0.1}") + fake_model("b", "{compute: 0.5, memory: 0.1}")));
  std::vector<InstanceStatus> instances = node->instances();
  ASSERT_EQ(instances.size(), 2u);
  // Each engine runs pinned to its own core(s) and under its memory cap.
  std::string cpus_a = testing::proc_status_field(instances[0].process.pid, "Cpus_allowed_list");
  std::string cpus_b = testing::proc_status_field(instances[1].process.pid, "Cpus_allowed_list");
  EXPECT_FALSE(cpus_a.empty());
  EXPECT_NE(cpus_a, cpus_b);
  rlimit limit{};
  ASSERT_EQ(::prlimit(instances[0].process.pid, RLIMIT_DATA, nullptr, &limit), 0);
  EXPECT_EQ(limit.rlim_cur, node->placement().instances[0].memory_cap_bytes);

  std::atomic<int> ok{0}, bad{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 15; ++i) {
        auto r = stream_request(node->port(), t % 2 ? "/v1/chat/completions" : "/v1/completions",
                                body(t < 2 ? "a" : "b", 8), 10);
        bool good = r.complete && r.status == 200 && r.body.find("[DONE]") != std::string::npos;
        (good ? ok : bad)++;
      }
    });
  }
  for (std::thread& c : clients) c.join();
  EXPECT_EQ(ok, 60);
  EXPECT_EQ(bad, 0);
  HttpReply models = http_get(node->url() + "/v1/models");
  EXPECT_EQ(Json::parse(models.body)["data"].size(), 2u);
  // The router's /metrics carries the engines' own series, once per family, per replica.
  std::string metrics = http_get(node->url() + "/metrics").body;
  EXPECT_NE(metrics.find("gpufrac:node_requests_total{model=\"a\"} 30"), std::string::npos)
      << metrics;
  for (const char* replica : {"a/0", "b/0"}) {
    size_t at = metrics.find(std::string("vllm:request_success_total{replica=\"") + replica);
    ASSERT_NE(at, std::string::npos) << replica << "\n" << metrics;
    std::string line = metrics.substr(at, metrics.find('\n', at) - at);
    EXPECT_EQ(line.substr(line.rfind(' ') + 1), "30") << line;
  }
  size_t type = metrics.find("# TYPE vllm:request_success_total counter");
  ASSERT_NE(type, std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("# TYPE vllm:request_success_total counter", type + 1), std::string::npos);
  EXPECT_EQ(http_post_json(node->url() + "/v1/completions", body("nope", 2)).status, 404);

  std::string run_dir = node->run_dir();
  node->down();
  for (const InstanceStatus& s : instances) EXPECT_FALSE(process_group_alive(s.process)) << s.name;
  Json state = read_node_state(run_dir);
  EXPECT_EQ(state["state"], "stopped");
  EXPECT_EQ(state["models"][0]["state"], "stopped");
}

TEST_F(CpuNodeTest,
       KillNineHoldsThatModelsRequestsUntilItIsBackWhileTheOtherModelsStreamsComplete) {
  std::unique_ptr<Node> node = Node::up(spec(fake_model("a", "{compute: 0.5, memory: 0.1}") +
                                             fake_model("b", "{compute: 0.5, memory: 0.1}", "", 20)));
  std::vector<InstanceStatus> keep;
  ProcessId victim = find(*node, "a", keep)->process;

  // Streams of b that are in flight while a is killed: 100 tokens, 20 ms apart (~2 s each).
  std::vector<testing::RawReply> streams(6);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < streams.size(); ++i) {
    clients.emplace_back([&, i] { streams[i] = stream_request(node->port(), "/v1/completions", body("b", 100), 20); });
  }
  ASSERT_TRUE(eventually([&] { return node->instances().size() == 2 && true; }, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int64_t killed_at = monotonic_ns();
  ASSERT_EQ(::kill(victim.pid, SIGKILL), 0);

  // Once the supervisor has seen the death, a request for a waits in the router and is answered
  // when a is back (a new process, serving) within 10 s of the kill.
  ASSERT_TRUE(eventually([&] { return find(*node, "a", keep)->state != InstanceState::kReady; }, 5));
  HttpReply held = http_post_json(node->url() + "/v1/completions", body("a", 2), 15);
  EXPECT_EQ(held.status, 200) << held.body;
  EXPECT_NE(held.body.find("[DONE]"), std::string::npos) << held.body;
  EXPECT_EQ(find(*node, "a", keep)->state, InstanceState::kReady);
  double back_s = double(monotonic_ns() - killed_at) / 1e9;
  EXPECT_LT(back_s, 10);
  const InstanceStatus* a = find(*node, "a", keep);
  EXPECT_NE(a->process.pid, victim.pid);
  EXPECT_EQ(a->restarts, 1);
  EXPECT_NE(a->last_exit.find("signal 9"), std::string::npos) << a->last_exit;
  EXPECT_EQ(http_post_json(node->url() + "/v1/completions", body("a", 2)).status, 200);

  for (std::thread& c : clients) c.join();
  for (const testing::RawReply& s : streams) {
    EXPECT_TRUE(s.complete) << s.error;
    EXPECT_EQ(s.status, 200);
    EXPECT_NE(s.body.find("[DONE]"), std::string::npos);
  }
  EXPECT_EQ(find(*node, "b", keep)->restarts, 0);
  std::printf("killed model back in %.2f s\n", back_s);
}

TEST_F(CpuNodeTest, AModelThatKeepsFailingIsMarkedFailedWhileTheOtherServes) {
  // a serves once; every later start exits at once (its marker exists): a crash loop.
  std::string marker = dir_.path() + "/a-started";
  std::unique_ptr<Node> node = Node::up(
      spec(fake_model("a", "{compute: 0.5, memory: 0.1}",
                      "test -e " + marker + " && exit 3; touch " + marker + "; ") +
           "    failure_limit: 3\n" + fake_model("b", "{compute: 0.5, memory: 0.1}")));
  std::vector<InstanceStatus> keep;
  ::kill(find(*node, "a", keep)->process.pid, SIGKILL);
  // Failures 1 (the kill), 2 and 3 (exit code 3 after 0.5 s and 1 s of backoff): failed.
  ASSERT_TRUE(eventually([&] { return find(*node, "a", keep)->state == InstanceState::kFailed; }, 15));
  const InstanceStatus* a = find(*node, "a", keep);
  EXPECT_EQ(a->failures, 3);
  EXPECT_EQ(a->restarts, 2);
  EXPECT_DOUBLE_EQ(a->backoff_s, 1.0);
  EXPECT_NE(a->reason.find("3 times in a row"), std::string::npos) << a->reason;
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_EQ(find(*node, "a", keep)->restarts, 2) << "a failed model was restarted";

  HttpReply refused = http_post_json(node->url() + "/v1/completions", body("a", 2));
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(Json::parse(refused.body)["error"]["code"], "model_failed") << refused.body;
  EXPECT_EQ(http_post_json(node->url() + "/v1/completions", body("b", 2)).status, 200);
  std::string table = format_node_status(read_node_state(node->run_dir()));
  EXPECT_NE(table.find("model a failed: failed 3 times in a row"), std::string::npos) << table;
  EXPECT_NE(table.find("BACKOFF"), std::string::npos) << table;
  HttpReply metrics = http_get(node->url() + "/metrics");
  EXPECT_NE(metrics.body.find("gpufrac:node_engine_restarts_total{model=\"a\"} 2"), std::string::npos)
      << metrics.body;
}

TEST_F(CpuNodeTest, ADeadEnginesWorkersGoWithIt) {
  // A shell that runs the engine as its child (not exec): killing the shell must not leave the
  // engine holding the port, or the restart could never bind it.
  std::unique_ptr<Node> node = Node::up(spec(fake_model("a", "{compute: 1, memory: 0.1}", "true; ")));
  std::vector<InstanceStatus> keep;
  ProcessId shell = find(*node, "a", keep)->process;
  std::vector<pid_t> tree = process_tree(shell.pid);
  ASSERT_EQ(tree.size(), 2u);
  ::kill(shell.pid, SIGKILL);
  ASSERT_TRUE(eventually([&] { return find(*node, "a", keep)->state == InstanceState::kReady &&
                                      find(*node, "a", keep)->restarts == 1; }, 10));
  EXPECT_FALSE(process_alive(process_identity(tree[1])));
  EXPECT_EQ(http_post_json(node->url() + "/v1/completions", body("a", 2)).status, 200);
}

TEST_F(CpuNodeTest, AnUnplaceableSpecStartsNothing) {
  NodeSpec s = spec(fake_model("a", "{compute: 0.5, memory: 0.6}") + fake_model("b", "{compute: 0.5, memory: 0.6}"));
  try {
    Node::up(s);
    FAIL() << "an over-committed spec was started";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("models[1].fraction.memory"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/run/state.json"));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/run/logs"));
}

TEST_F(CpuNodeTest, AModelThatCannotStartTakesEverythingDown) {
  NodeSpec s = spec(fake_model("a", "{compute: 0.5, memory: 0.1}") +
                    "  - name: b\n    command: echo engine b cannot load its weights {port}; exit 3\n"
                    "    fraction: {compute: 0.5, memory: 0.1}\n");
  try {
    Node::up(s);
    FAIL() << "a node with a broken model came up";
  } catch (const RuntimeFailure& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("model 'b'"), std::string::npos) << message;
    EXPECT_NE(message.find("exit code 3"), std::string::npos) << message;
    EXPECT_NE(message.find("cannot load its weights"), std::string::npos) << message;
  }
  Json state = read_node_state(dir_.path() + "/run");
  EXPECT_EQ(state["state"], "failed");
  for (const Json& m : state["models"]) {
    ProcessId p{pid_t(m.value("pid", 0)), m.value("start_time", uint64_t(0))};
    EXPECT_FALSE(process_group_alive(p)) << m.dump();
  }
}

TEST_F(CpuNodeTest, ASecondNodeInTheSameRunDirIsRefused) {
  std::unique_ptr<Node> node = Node::up(spec(fake_model("a", "{compute: 0.5, memory: 0.1}")));
  try {
    Node::up(spec(fake_model("a", "{compute: 0.5, memory: 0.1}")));
    FAIL() << "two nodes share a run directory";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("already running"), std::string::npos) << e.what();
  }
  EXPECT_EQ(http_post_json(node->url() + "/v1/completions", body("a", 2)).status, 200);
}

TEST_F(CpuNodeTest, DownDrainsRequestsInFlight) {
  std::unique_ptr<Node> node = Node::up(spec(fake_model("a", "{compute: 1, memory: 0.1}", "", 20)));
  testing::RawReply stream;
  std::thread client([&] { stream = stream_request(node->port(), "/v1/completions", body("a", 50), 20); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  node->down();  // returns once the stream has been served to its end
  client.join();
  EXPECT_TRUE(stream.complete) << stream.error;
  EXPECT_NE(stream.body.find("[DONE]"), std::string::npos);
}

}  // namespace
}  // namespace gpufrac
