// `gpufrac experiment` with gpus: 4 on 4 fake GPUs: the fake NVML (tests/fakes/fake_nvml_node.cpp),
// the fake MPS control daemon (tests/fakes/fake_mps_control.py) and, for every built-in model,
// tests/fakes/fake_gpufrac_serve (bench's scripted SSE server as `gpufrac serve`). Checks that
// every arm ran as one node over the 4 GPUs — dedicated one model per GPU, timeslice and fractions
// two, fractions under one daemon per GPU with that GPU's UUID and its own pipe directory, each
// told to quit — with every model of the node driven at once (all of them targets of every point,
// their measured requests overlapping in time); that the summaries say gpus 4 and the report's
// tok/s per GPU is the node's tok/s / 4; that the packing search probes m models on every GPU; that
// nothing is left running; that the multi-GPU suite's node check (tests/gpu/multigpu/
// check_node_state.py) passes each arm's node and fails a wrong layout; and that its results doc
// (tests/gpu/multigpu/results_doc.py) is drafted from these results with the study's and the
// one-GPU run's numbers beside ours. And, with tests/fakes/fake_nvidia_smi on PATH, that the
// suite and `scripts/gpu-check --only multigpu` refuse a machine of fewer than 2 GPUs in one line.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/json.h"
#include "experiment/experiment_runner.h"
#include "experiment/experiment_spec.h"
#include "node/fake_gpu_node.h"
#include "node/gpus.h"
#include "node/node_state.h"
#include "node/node_test_util.h"
#include "node/process.h"

namespace gpufrac {
namespace {

namespace fs = std::filesystem;
using testing::fake_gpu_uuid;
using testing::read_file;

constexpr int kGpus = 4;

// The fake machine every process of the experiment sees, set before anything loads NVML:
// 4 GPUs, the fake MPS control program, node run directories under a fresh directory, and
// `gpufrac` (the fake serve) beside the real memcap shim in bin/, where the node looks for it.
struct FakeMachine {
  testing::TempDir dir;
  std::string bin = dir.path() + "/bin/gpufrac";
  FakeMachine() {
    testing::use_fake_driver(kGpus);
    ::setenv("GPUFRAC_MPS_CONTROL", testing::fake_path("fake_mps_control.py").c_str(), 1);
    ::setenv("GPUFRAC_RUN_DIR", (dir.path() + "/run").c_str(), 1);
    ::setenv("FAKE_SERVE_ENGINE", SCRIPTED_SSE_SERVER, 1);
    fs::create_directories(dir.path() + "/bin");
    fs::create_symlink(fs::absolute(testing::fake_path("fake_gpufrac_serve")), bin);
    fs::create_symlink(MEMCAP_SHIM, dir.path() + "/bin/libgpufrac_memcap.so");
  }
};
const FakeMachine& machine() {
  static FakeMachine fake;
  return fake;
}
const bool kFakeMachine = (machine(), true);

Json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return in ? Json::parse(in) : Json();
}

// The report's CSV as rows of name -> value.
std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::map<std::string, std::string>> rows;
  std::string line;
  std::vector<std::string> header;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream split(line);
    for (std::string cell; std::getline(split, cell, ',');) cells.push_back(cell);
    if (header.empty()) {
      header = cells;
      continue;
    }
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size() && i < cells.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(row);
  }
  return rows;
}

ProcessId recorded(const Json& entry) {
  return {pid_t(entry.value("pid", 0)), entry.value("start_time", uint64_t(0))};
}

// The measured requests of every model of a point overlap: the last model to start its first
// request did so before the first model to finish its last one finished it.
void expect_models_driven_at_once(const std::string& point_dir, int models) {
  std::map<std::string, std::pair<int64_t, int64_t>> window;  // model -> first sent, last end
  std::ifstream in(point_dir + "/records.jsonl");
  for (std::string line; std::getline(in, line);) {
    Json r = Json::parse(line);
    if (r["warmup"].get<bool>()) continue;
    auto [it, fresh] = window.try_emplace(r["model"].get<std::string>(), INT64_MAX, 0);
    it->second.first = std::min(it->second.first, r["sent_ns"].get<int64_t>());
    it->second.second = std::max(it->second.second, r["end_ns"].get<int64_t>());
  }
  ASSERT_EQ(window.size(), size_t(models)) << point_dir;
  int64_t last_start = 0, first_end = INT64_MAX;
  for (const auto& [model, w] : window) {
    last_start = std::max(last_start, w.first);
    first_end = std::min(first_end, w.second);
  }
  EXPECT_LT(last_start, first_end) << point_dir << ": some model ran alone";
}

TEST(ExperimentMultiGpu, EveryArmRunsAsOneNodeOverFourGpusAndReportsPerGpu) {
  const std::string dir = machine().dir.path();
  const std::string results = dir + "/results";
  ExperimentSpec spec = parse_experiment_spec(
      "name: fake-x4\nmodel: qwen3-4b\ndevice: cuda\ngpus: 4\n"
      "engine_args: {max-num-seqs: 8, max-model-len: 512}\n"
      "workload: {isl: 32, osl: 8, requests: 4, warmup: 1}\n"
      "runs:\n"
      "  - {arm: dedicated, models_per_gpu: 1, concurrency: [1, 2]}\n"
      "  - {arm: timeslice, models_per_gpu: 2, concurrency: [1]}\n"
      "  - {arm: fractions, models_per_gpu: 2, concurrency: [1]}\n"
      "slo: {ttft_p90_ms: 2000, itl_p50_ms: 200}\n"
      "packing_search: {arm: fractions, rate: 20, max_models_per_gpu: 3, requests: 4}\n"
      "output: " +
          results + "\n",
      "fake-x4.yaml");
  ExperimentOptions options;
  options.gpufrac_binary = machine().bin;
  options.spec_name = "fake-x4.yaml";
  options.progress = false;
  std::ostringstream out;
  ASSERT_EQ(run_experiment(spec, options, out), 0) << out.str();
  EXPECT_NE(out.str().find("4 point(s) to run on 4 GPUs"), std::string::npos) << out.str();

  // Every point: a node of m models per GPU on 4 GPUs, every one of them driven at once.
  const struct {
    const char* point;
    int models_per_gpu;
  } points[] = {{"dedicated-m1/c1", 1},
                {"dedicated-m1/c2", 1},
                {"timeslice-m2/c1", 2},
                {"fractions-m2/c1", 2}};
  std::map<std::string, double> tok_s;
  for (const auto& p : points) {
    SCOPED_TRACE(p.point);
    Json summary = read_json(results + "/" + p.point + "/summary.json");
    EXPECT_EQ(summary["config"]["gpus"], kGpus);
    EXPECT_EQ(summary["config"]["models_per_gpu"], p.models_per_gpu);
    std::set<std::string> models;
    for (const Json& t : summary["targets"]) {
      models.insert(t["model"].get<std::string>());
      EXPECT_EQ(t["metrics"]["completed"], 4) << t["model"];
      EXPECT_EQ(t["metrics"]["failed"], 0) << t["model"];
    }
    EXPECT_EQ(models.size(), size_t(p.models_per_gpu * kGpus));
    EXPECT_EQ(summary["aggregate"]["output_token_mismatches"], 0);
    tok_s[p.point] = summary["aggregate"]["output_token_throughput"].get<double>();
    EXPECT_GT(tok_s[p.point], 0);
    expect_models_driven_at_once(results + "/" + p.point, p.models_per_gpu * kGpus);
  }

  // The report divides each node's tok/s by its 4 GPUs, and says so.
  for (const char* arm : {"dedicated_m1", "timeslice_m2", "fractions_m2"}) {
    std::vector<std::map<std::string, std::string>> rows =
        read_csv(results + "/report/points-" + arm + ".csv");
    ASSERT_FALSE(rows.empty()) << arm;
    for (const auto& row : rows) {
      double total = std::stod(row.at("tok_s")), per_gpu = std::stod(row.at("tok_s_per_gpu"));
      EXPECT_NEAR(per_gpu * kGpus, total, 1e-9 * total) << arm;
    }
  }
  std::vector<std::map<std::string, std::string>> matched =
      read_csv(results + "/report/throughput-m2.csv");
  ASSERT_FALSE(matched.empty());
  EXPECT_EQ(matched[0].at("requests_per_gpu"), "2");  // fractions c1 beside dedicated c2
  EXPECT_NEAR(std::stod(matched[0].at("fractions_m2_tok_s_per_gpu")),
              tok_s["fractions-m2/c1"] / kGpus, 1e-6);
  EXPECT_NEAR(std::stod(matched[0].at("dedicated_m1_tok_s_per_gpu")),
              tok_s["dedicated-m1/c2"] / kGpus, 1e-6);
  std::string report = read_file(results + "/report/report.md");
  EXPECT_NE(report.find("2 models per GPU on 4 GPUs (8 models)"), std::string::npos) << report;
  EXPECT_NE(report.find("1 model per GPU on 4 GPUs (4 models)"), std::string::npos) << report;

  // Each arm's node, as its state file recorded it: the models spread over the 4 GPUs, a daemon
  // per GPU for fractions only, and nothing left running.
  const std::string run = dir + "/run/experiment-";
  for (const auto& [arm, m] : std::vector<std::pair<std::string, int>>{
           {"dedicated-m1", 1}, {"timeslice-m2", 2}, {"fractions-m2", 2}, {"fractions-m3", 3}}) {
    SCOPED_TRACE(arm);
    Json state = read_node_state(run + arm);
    EXPECT_EQ(state["state"], "stopped");
    std::map<std::string, int> per_gpu;
    for (const Json& model : state["models"]) {
      ++per_gpu[model["gpu"].get<std::string>()];
      EXPECT_EQ(model["gpu_uuid"], fake_gpu_uuid(std::stoi(model["gpu"].get<std::string>())));
      EXPECT_FALSE(process_group_alive(recorded(model))) << model.dump();
    }
    EXPECT_EQ(per_gpu, (std::map<std::string, int>{{"0", m}, {"1", m}, {"2", m}, {"3", m}}));
    bool fractions = arm.rfind("fractions", 0) == 0;
    ASSERT_EQ(state["mps"].size(), fractions ? size_t(kGpus) : 0u);
    for (const Json& daemon : state["mps"]) {
      int gpu = std::stoi(daemon["gpu"].get<std::string>());
      std::string pipe = run + arm + "/mps/gpu" + std::to_string(gpu) + "/pipe";
      EXPECT_EQ(daemon["pipe_dir"], pipe);
      EXPECT_EQ(read_json(pipe + "/daemon.json")["CUDA_VISIBLE_DEVICES"], fake_gpu_uuid(gpu));
      std::string told = read_file(pipe + "/commands.log");
      EXPECT_EQ(told.substr(told.rfind('\n', told.size() - 2) + 1), "quit\n") << pipe;
      EXPECT_FALSE(process_alive(recorded(daemon))) << daemon.dump();
    }
  }
  for (const MpsProcessSeen& m : discover_machine().mps) {
    EXPECT_EQ(m.pipe_dir.find(dir), std::string::npos)
        << "left running: MPS " << m.kind << " " << m.pid;
  }

  // The packing search's probe: 3 models on each of the 4 GPUs, all driven.
  Json packing = read_json(results + "/packing.json");
  EXPECT_EQ(packing["gpus"], kGpus);
  EXPECT_EQ(packing["largest_passing_models_per_gpu"], 3);
  Json probe = read_json(packing["probes"][0]["summary"].get<std::string>());
  EXPECT_EQ(probe["config"]["gpus"], kGpus);
  EXPECT_EQ(probe["targets"].size(), size_t(3 * kGpus));
  EXPECT_NE(out.str().find("**3 model(s) per GPU**, 12 models on 4 GPUs"), std::string::npos)
      << out.str();

  // The suite's check of each arm's node, on these nodes' state files.
  const std::string source = testing::source_dir();
  auto check_node = [&](const std::string& arm, const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {"python3", source + "/tests/gpu/multigpu/check_node_state.py",
                                     run + arm + "/state.json"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return run_command(argv, current_environment(), "", 30);
  };
  for (const auto& [arm, flags] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"dedicated-m1", {"--gpus", "4", "--models-per-gpu", "1"}},
           {"timeslice-m2", {"--gpus", "4", "--models-per-gpu", "2"}},
           {"fractions-m2", {"--gpus", "4", "--models-per-gpu", "2", "--daemons"}}}) {
    CommandOutput checked = check_node(arm, flags);
    EXPECT_TRUE(checked.ok()) << arm << ": " << checked.out << checked.err;
  }
  CommandOutput wrong = check_node("fractions-m2", {"--gpus", "8", "--models-per-gpu", "2"});
  EXPECT_FALSE(wrong.ok());
  EXPECT_NE(wrong.out.find("not 2 on each"), std::string::npos) << wrong.out;
  EXPECT_NE(wrong.out.find("4 MPS daemon(s), not none"), std::string::npos) << wrong.out;
  wrong = check_node("timeslice-m2", {"--gpus", "4", "--models-per-gpu", "2", "--daemons"});
  EXPECT_FALSE(wrong.ok());
  EXPECT_NE(wrong.out.find("MPS daemons of GPUs [], not one for each"), std::string::npos)
      << wrong.out;

  // The results doc of tests/gpu/multigpu/run, drafted from these results.
  CommandOutput study =
      run_command({std::getenv("GPUFRAC_BIN"), "report", source + "/tests/data/reference-study",
                   "--models", "16", "--out", dir + "/study-report"},
                  current_environment(), "", 60);
  ASSERT_TRUE(study.ok()) << study.err;
  testing::write_file(dir + "/gpus.txt", "GPU 0: Fake H200 (UUID: " + fake_gpu_uuid(0) +
                                             ")\nGPU 1: Fake H200 (UUID: " + fake_gpu_uuid(1) +
                                             ")\nGPU 2: Fake H200 (UUID: " + fake_gpu_uuid(2) +
                                             ")\nGPU 3: Fake H200 (UUID: " + fake_gpu_uuid(3) +
                                             ")\n");
  CommandOutput doc =
      run_command({"python3", source + "/tests/gpu/multigpu/results_doc.py", "--results", results,
                   "--study-report", dir + "/study-report", "--one-gpu",
                   source + "/docs/results/raw/2026-11-29-h200/experiment", "--command",
                   "gpufrac experiment fake-x4.yaml", "--gpu-list", dir + "/gpus.txt", "--driver",
                   "999.99-fake", "--out", dir + "/doc.md"},
                  current_environment(), "", 60);
  ASSERT_TRUE(doc.ok()) << doc.out << doc.err;
  std::string text = read_file(dir + "/doc.md");
  EXPECT_NE(text.find("on 4 GPUs"), std::string::npos) << text;
  EXPECT_NE(text.find("4 x Fake H200 (4 GPUs in `nvidia-smi -L`), driver 999.99-fake"),
            std::string::npos)
      << text;
  char ours[64];  // row 2 req/GPU: our three arms' tok/s per GPU
  std::snprintf(ours, sizeof ours, "| 2 | %.1f | ", tok_s["dedicated-m1/c2"] / kGpus);
  EXPECT_NE(text.find(ours), std::string::npos) << ours << "\n" << text;
  EXPECT_NE(text.find("| 44.5% | 53.1% |"), std::string::npos) << text;  // study HAMi %, one GPU's
  EXPECT_NE(text.find("| 63.5% | 72.2% |"), std::string::npos)
      << text;  // study fractions %, one GPU's
  EXPECT_NE(text.find("**3 models per GPU, 12 on 4 GPUs**"), std::string::npos) << text;
  EXPECT_NE(text.find("Every point: config.gpus 4"), std::string::npos) << text;
}

// With fewer GPUs than the suite needs: the suite's own run fails at once with one line in the
// summary, and `scripts/gpu-check --only multigpu` refuses in one line before it builds anything
// (its --build-dir names nothing, which a build or a suite would stumble on).
TEST(ExperimentMultiGpu, TheMultiGpuSuiteRefusesAMachineOfFewerGpusInOneLine) {
  const std::string source = testing::source_dir();
  testing::TempDir dir;
  fs::create_directories(dir.path() + "/path");
  fs::create_symlink(fs::absolute(testing::fake_path("fake_nvidia_smi")),
                     dir.path() + "/path/nvidia-smi");
  std::vector<std::string> env = current_environment();
  const char* path = std::getenv("PATH");
  set_env(env, "PATH", dir.path() + "/path:" + (path ? path : "/usr/bin:/bin"));
  set_env(env, "FAKE_NVIDIA_SMI_GPUS", "1");

  const std::string suite_out = dir.path() + "/suite", summary = dir.path() + "/summary.txt";
  fs::create_directories(suite_out);
  std::vector<std::string> suite_env = env;
  set_env(suite_env, "GPUFRAC_SOURCE_DIR", source);
  set_env(suite_env, "GPUFRAC_BIN", dir.path() + "/no-gpufrac");
  set_env(suite_env, "GPUFRAC_SUITE_OUT", suite_out);
  set_env(suite_env, "GPUFRAC_SUITE_SUMMARY", summary);
  set_env(suite_env, "GPUFRAC_MULTIGPU_RESULTS", dir.path() + "/results");
  CommandOutput suite = run_command({source + "/tests/gpu/multigpu/run"}, suite_env, "", 60);
  ASSERT_FALSE(suite.timed_out);
  EXPECT_TRUE(WIFEXITED(suite.wait_status) && WEXITSTATUS(suite.wait_status) == 1)
      << suite.out << suite.err;
  std::string lines = read_file(summary);
  EXPECT_EQ(std::count(lines.begin(), lines.end(), '\n'), 1) << lines;
  EXPECT_NE(lines.find("this machine has 1 GPU(s); the multi-GPU suite needs at least 2"),
            std::string::npos)
      << lines;
  EXPECT_EQ(suite.out, lines) << "the suite printed more than its summary line";

  std::vector<std::string> check_env = env;
  set_env(check_env, "OUT", dir.path() + "/check-out");
  set_env(check_env, "GPUFRAC_BUILD_DIR", std::nullopt);
  CommandOutput check = run_command({source + "/scripts/gpu-check", "--only", "multigpu",
                                     "--build-dir", dir.path() + "/no-build"},
                                    check_env, "", 60);
  ASSERT_FALSE(check.timed_out);
  EXPECT_TRUE(WIFEXITED(check.wait_status) && WEXITSTATUS(check.wait_status) == 1)
      << check.out << check.err;
  const std::string refusal =
      "gpu-check: suite multigpu needs at least 2 GPUs, this machine has 1 (nvidia-smi -L); run "
      "it on a machine with 2 or more\n";
  EXPECT_NE(check.out.find(refusal), std::string::npos) << check.out;
  // Only the log's banner and the machine's GPU come before it; nothing after.
  EXPECT_EQ(check.out.size() - check.out.find(refusal), refusal.size()) << check.out;
  EXPECT_NE(check.out.find("gpu: Fake H200, 999.99-fake, 143771 MiB\n"), std::string::npos)
      << check.out;
  EXPECT_EQ(std::count(check.out.begin(), check.out.end(), '\n'), 3) << check.out;

  // Two GPUs are enough for gpu-check to go on: past the refusal, to the missing build dir.
  set_env(check_env, "FAKE_NVIDIA_SMI_GPUS", "2");
  check = run_command({source + "/scripts/gpu-check", "--only", "multigpu", "--build-dir",
                       dir.path() + "/no-build"},
                      check_env, "", 60);
  EXPECT_EQ(check.out.find("needs at least"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("no build dir"), std::string::npos) << check.out;
}

}  // namespace
}  // namespace gpufrac
