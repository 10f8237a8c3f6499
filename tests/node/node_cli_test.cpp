// The node commands as users run them: `gpufrac up --detach`, `status`, `down` from other
// processes (down after a killed node process cleans up what it recorded and nothing else),
// `gpufrac gpus`, spec errors, and a two-model CPU node of the real engine (`gpufrac serve --model
// tiny`) answering `gpufrac bench` through the router.
#include <signal.h>

#include "common/json.h"
#include "node/node_state.h"
#include "node/process.h"
#include "fake_engine_spec.h"

namespace gpufrac {
namespace {

using testing::eventually;
using testing::fake_model;
using testing::read_file;
using testing::write_file;

std::string gpufrac_bin() {
  const char* bin = std::getenv("GPUFRAC_BIN");
  return bin ? bin : "gpufrac";
}

CommandOutput gpufrac(const std::vector<std::string>& args, double timeout_s = 60,
                      const std::vector<std::pair<std::string, std::string>>& env = {}) {
  std::vector<std::string> argv = {gpufrac_bin()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> environment = current_environment();
  for (const auto& [name, value] : env) set_env(environment, name, value);
  return run_command(argv, environment, "", timeout_s);
}

ProcessId recorded(const Json& entry) {
  return {pid_t(entry.value("pid", 0)), entry.value("start_time", uint64_t(0))};
}

class NodeCliTest : public ::testing::Test {
 protected:
  std::string write_spec(const std::string& models) {
    std::string path = dir_.path() + "/node.yaml";
    write_file(path, "name: cli\nlisten: 127.0.0.1:0\ndevice: cpu\nstop_timeout: 3s\nrun_dir: " + run_dir() +
                         "\nmodels:\n" + models);
    return path;
  }
  std::string run_dir() const { return dir_.path() + "/run"; }
  void TearDown() override { gpufrac({"down", "--run-dir", run_dir()}, 60); }
  testing::TempDir dir_;
};

TEST_F(NodeCliTest, UpDetachStatusDownLeaveNothingRunning) {
  std::string spec = write_spec(fake_model("a", "{compute: 0.5, memory: 0.1}") +
                                fake_model("b", "{compute: 0.5, memory: 0.1}"));
  CommandOutput up = gpufrac({"up", spec, "--detach"});
  ASSERT_TRUE(up.ok()) << up.out << up.err;
  EXPECT_NE(up.out.find("running"), std::string::npos) << up.out;
  EXPECT_NE(up.out.find("gpufrac down --run-dir"), std::string::npos) << up.out;

  CommandOutput status = gpufrac({"status", spec, "--json"});
  ASSERT_TRUE(status.ok()) << status.err;
  Json state = Json::parse(status.out);
  EXPECT_EQ(state["state"], "running");
  EXPECT_EQ(state["node_alive"], true);
  ASSERT_EQ(state["models"].size(), 2u);
  for (const Json& m : state["models"]) {
    EXPECT_EQ(m["state"], "ready");
    EXPECT_EQ(m["mode"], "fractions");
    EXPECT_EQ(m["sm_percent"], 50);
    EXPECT_TRUE(m["memory_used_bytes"].is_number()) << m.dump();
    EXPECT_TRUE(process_alive(recorded(m)));
  }
  CommandOutput table = gpufrac({"status", "--run-dir", run_dir()});
  EXPECT_NE(table.out.find("MEM CAP"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("ready"), std::string::npos) << table.out;

  CommandOutput down = gpufrac({"down", spec});
  ASSERT_TRUE(down.ok()) << down.out << down.err;
  EXPECT_NE(down.out.find("is down"), std::string::npos) << down.out;
  EXPECT_FALSE(process_alive(recorded(state["node"])));
  for (const Json& m : state["models"]) EXPECT_FALSE(process_group_alive(recorded(m))) << m.dump();
  EXPECT_EQ(read_node_state(run_dir())["state"], "stopped");
  CommandOutput again = gpufrac({"down", "--run-dir", run_dir()});
  EXPECT_TRUE(again.ok());
  EXPECT_NE(again.out.find("not running"), std::string::npos) << again.out;
}

TEST_F(NodeCliTest, DownAfterTheNodeProcessWasKilledStopsWhatItStartedAndNothingElse) {
  std::string spec = write_spec(fake_model("a", "{compute: 0.5, memory: 0.1}") +
                                fake_model("b", "{compute: 0.5, memory: 0.1}"));
  ASSERT_TRUE(gpufrac({"up", spec, "--detach"}).ok());
  Json state = read_node_state(run_dir());
  SpawnOptions bystander_options;
  bystander_options.argv = {"sleep", "60"};
  bystander_options.env = current_environment();
  ProcessId bystander = spawn_process(bystander_options);

  ::kill(recorded(state["node"]).pid, SIGKILL);
  ASSERT_TRUE(eventually([&] { return !process_alive(recorded(state["node"])); }, 5));
  for (const Json& m : state["models"]) EXPECT_TRUE(process_alive(recorded(m)));  // orphaned engines
  CommandOutput status = gpufrac({"status", "--run-dir", run_dir()});
  EXPECT_NE(status.out.find("node process gone"), std::string::npos) << status.out;

  // A new node there would lose track of the orphans: refused until down has run.
  CommandOutput again = gpufrac({"up", spec, "--detach"});
  EXPECT_EQ(WEXITSTATUS(again.wait_status), 1);
  EXPECT_NE(again.err.find("left model a"), std::string::npos) << again.err;

  CommandOutput down = gpufrac({"down", "--run-dir", run_dir()});
  ASSERT_TRUE(down.ok()) << down.err;
  EXPECT_NE(down.out.find("2 leftover"), std::string::npos) << down.out;
  for (const Json& m : state["models"]) EXPECT_FALSE(process_group_alive(recorded(m))) << m.dump();
  EXPECT_TRUE(process_alive(bystander));
  stop_process_group(bystander, 1, true);
}

TEST_F(NodeCliTest, SpecErrorsAreOneLineAndStartNothing) {
  std::string spec = write_spec("  - {name: a, model: tiny, fraction: {compute: 2, memory: 0.1}}\n");
  CommandOutput up = gpufrac({"up", spec});
  EXPECT_EQ(WEXITSTATUS(up.wait_status), 2) << up.err;
  EXPECT_NE(up.err.find("models[0].fraction.compute"), std::string::npos) << up.err;
  EXPECT_EQ(std::count(up.err.begin(), up.err.end(), '\n'), 1) << up.err;
  EXPECT_FALSE(std::filesystem::exists(run_dir() + "/state.json"));
  CommandOutput detached = gpufrac({"up", spec, "--detach"});
  EXPECT_EQ(WEXITSTATUS(detached.wait_status), 2) << detached.err;
}

TEST_F(NodeCliTest, GpusListsFakeGpusOrTheCpu) {
  CommandOutput cpu = gpufrac({"gpus"}, 20, {{"GPUFRAC_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}});
  ASSERT_TRUE(cpu.ok()) << cpu.err;
  EXPECT_NE(cpu.out.find("No NVIDIA GPU"), std::string::npos) << cpu.out;
  CommandOutput gpus = gpufrac({"gpus", "--json"}, 20, {{"GPUFRAC_NVML_LIBRARY", FAKE_NVML_NODE}, {"FAKE_NVML_GPUS", "2"}});
  ASSERT_TRUE(gpus.ok()) << gpus.err;
  Json inventory = Json::parse(gpus.out);
  ASSERT_EQ(inventory["gpus"].size(), 2u);
  EXPECT_EQ(inventory["gpus"][1]["uuid"], "GPU-00000000-0000-0000-0000-000000000001");
  EXPECT_EQ(inventory["gpus"][0]["sm_count"], 132);
  EXPECT_EQ(inventory["gpus"][0]["compute_mode"], "default");
  CommandOutput table = gpufrac({"gpus"}, 20, {{"GPUFRAC_NVML_LIBRARY", FAKE_NVML_NODE}});
  EXPECT_NE(table.out.find("Fake H200"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("MPS daemons"), std::string::npos) << table.out;
}

TEST_F(NodeCliTest, TwoTinyEnginesOnTheCpuAnswerBenchThroughTheRouter) {
  CommandOutput help = gpufrac({"--help"});
  if (help.out.find("serve") == std::string::npos || help.out.find("bench") == std::string::npos) {
    GTEST_SKIP() << "this gpufrac has no serve or bench command";
  }
  std::string spec = write_spec(
      "  - {name: a, model: tiny, engine_args: {max-model-len: 256, max-num-seqs: 8}, "
      "fraction: {compute: 0.5, memory: 0.25}}\n"
      "  - {name: b, model: tiny, engine_args: {max-model-len: 256, max-num-seqs: 8}, "
      "fraction: {compute: 0.5, memory: 0.25}}\n");
  CommandOutput up = gpufrac({"up", spec, "--detach"}, 120);
  ASSERT_TRUE(up.ok()) << up.out << up.err;
  std::string url = read_node_state(run_dir())["url"];
  CommandOutput bench = gpufrac({"bench", "--target", url + "=a", "--target", url + "=b", "--concurrency",
                                 "2", "--requests", "8", "--warmup", "2", "--isl", "32", "--osl", "8",
                                 "--arm", "fractions", "--models-per-gpu", "2", "--no-progress",
                                 "--out", dir_.path() + "/bench"},
                                300);
  ASSERT_TRUE(bench.ok()) << bench.out << bench.err;
  Json summary = Json::parse(read_file(dir_.path() + "/bench/fractions-m2/c2/summary.json"));
  EXPECT_EQ(summary["aggregate"]["completed"], 16) << summary["aggregate"].dump();
  EXPECT_EQ(summary["aggregate"]["failed"], 0);
  ASSERT_EQ(summary["targets"].size(), 2u);
  for (const Json& target : summary["targets"]) {
    EXPECT_EQ(target["metrics"]["completed"], 8) << target.dump();
    EXPECT_EQ(target["metrics"]["output_token_mismatches"], 0);
  }
  EXPECT_TRUE(gpufrac({"down", "--run-dir", run_dir()}).ok());
}

}  // namespace
}  // namespace gpufrac
