// `gpufrac bench` end to end: the binary against scripted servers, its files, its help and its
// flag errors; and the target syntax.
#include "bench/bench_command.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/json.h"
#include "scripted_bench_setup.h"

namespace gpufrac {
namespace {

struct Result {
  int exit_code;
  std::string output;  // stdout and stderr
};

Result run_gpufrac(const std::string& arguments) {
  const char* bin = std::getenv("GPUFRAC_BIN");
  if (!bin) ADD_FAILURE() << "GPUFRAC_BIN is not set (ctest sets it)";
  std::string command = std::string(bin ? bin : "gpufrac") + " " + arguments + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  std::string output;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

Json read_json(const std::string& path) {
  std::ifstream in(path);
  return Json::parse(in);
}

class BenchCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = std::filesystem::temp_directory_path() / ("bench-cmd-" + std::to_string(::getpid()));
    std::filesystem::remove_all(out_);
  }
  void TearDown() override { std::filesystem::remove_all(out_); }
  // `gpufrac bench` against one scripted server (its model "scripted"), writing into out_.
  Result run_bench(const ScriptedSseServer& server, const std::string& flags) {
    return run_gpufrac("bench --target " + server.url() + "=scripted " + flags + " --out " + out_);
  }
  std::string out_;
};

TEST_F(BenchCommand, TwoTargetsSweepWritesEveryFile) {
  ScriptedSseOptions options = scripted_timing(5, 1);
  options.models = {"m0"};
  RunningScriptedServer first(options);
  options.models = {"only-model"};
  RunningScriptedServer second(options);
  // The second target's model comes from its /v1/models.
  Result r = run_gpufrac("bench --target " + first.url() + "=m0 --target " + second.url() +
                         "/v1 --concurrency 1,3 --requests 5 --warmup 2 --isl 20 --osl 6 "
                         "--arm fractions --models-per-gpu 2 --gpus 1 --out " +
                         out_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("TTFT p50"), std::string::npos) << r.output;
  for (const char* point : {"c1", "c3"}) {
    std::string dir = out_ + "/fractions-m2/" + point;
    Json summary = read_json(dir + "/summary.json");
    EXPECT_EQ(summary["config"]["arm"], "fractions");
    EXPECT_EQ(summary["config"]["models_per_gpu"], 2);
    EXPECT_EQ(summary["config"]["requests"], 5);
    EXPECT_EQ(summary["config"]["warmup"], 2);
    EXPECT_EQ(summary["config"]["concurrency"], point == std::string("c1") ? 1 : 3);
    ASSERT_EQ(summary["targets"].size(), 2u);
    EXPECT_EQ(summary["targets"][1]["model"], "only-model");
    EXPECT_EQ(summary["targets"][1]["url"], second.url());
    EXPECT_EQ(summary["aggregate"]["completed"], 10);
    EXPECT_EQ(summary["aggregate"]["failed"], 0);
    EXPECT_GT(summary["aggregate"]["output_token_throughput"].get<double>(), 0);
    EXPECT_TRUE(summary["client"]["cpu_us_per_token"].is_number());
    std::ifstream records(dir + "/records.jsonl");
    int lines = 0;
    for (std::string line; std::getline(records, line);) ++lines;
    EXPECT_EQ(lines, 14);  // (5 + 2) per target
    EXPECT_TRUE(std::filesystem::exists(dir + "/summary.csv"));
    Json aiperf = read_json(dir + "/profile_export_aiperf.json");
    EXPECT_EQ(aiperf["request_count"]["avg"], 10);
  }
  EXPECT_EQ(first.requests_received() + second.requests_received(), 28);
}

TEST_F(BenchCommand, NoCompletedRequestIsAnErrorAfterWritingFiles) {
  ScriptedSseOptions options;
  options.failures = {parse_failure_rule("http_error,status=503")};
  RunningScriptedServer server(options);
  Result r = run_bench(server, "--concurrency 2 --requests 4 --warmup 0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("no request completed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("HTTP 503: scripted failure"), std::string::npos) << r.output;
  Json summary = read_json(out_ + "/dedicated-m1/c2/summary.json");
  EXPECT_EQ(summary["aggregate"]["errors"]["http_error"], 4);
}

TEST_F(BenchCommand, OpenLoopDirectoryAndConfig) {
  RunningScriptedServer server(scripted_timing(1, 1));
  Result r = run_bench(server, "--request-rate 50 --concurrency 4 --requests 10 --osl 3 --isl 8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Json summary = read_json(out_ + "/dedicated-m1/r50/summary.json");
  EXPECT_EQ(summary["config"]["load"], "open");
  EXPECT_EQ(summary["config"]["request_rate"], 50.0);
  EXPECT_EQ(summary["config"]["concurrency"], 4);
  EXPECT_EQ(summary["config"]["warmup"], 0);
  EXPECT_EQ(summary["aggregate"]["completed"], 10);
}

TEST_F(BenchCommand, ChatTextPromptsEndToEnd) {
  RunningScriptedServer server(scripted_timing(2, 1));
  Result r = run_bench(server,
                       "--endpoint chat --isl 48 --isl-stddev 8 --osl 3 --concurrency 2 "
                       "--requests 6 --warmup 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("built 7 text prompts"), std::string::npos) << r.output;
  std::string dir = out_ + "/dedicated-m1/c2";
  Json summary = read_json(dir + "/summary.json");
  EXPECT_EQ(summary["config"]["endpoint"], "chat");
  EXPECT_EQ(summary["config"]["prompt"], "text");
  EXPECT_EQ(summary["aggregate"]["completed"], 6);
  EXPECT_EQ(summary["aggregate"]["input_token_mismatches"], 0);
  EXPECT_EQ(read_json(dir + "/profile_export_aiperf.json")["input_config"]["endpoint"]["type"],
            "chat");
  std::ifstream records(dir + "/records.jsonl");
  int lines = 0;
  for (std::string line; std::getline(records, line); ++lines) {
    Json record = Json::parse(line);
    EXPECT_EQ(record["input_tokens"], record["requested_input_tokens"]) << line;
    EXPECT_EQ(record["finish_reason"], "length") << line;
  }
  EXPECT_EQ(lines, 7);
}

TEST_F(BenchCommand, ChatWithoutTokenizeSaysWhatToDo) {
  ScriptedSseOptions options;
  options.tokenize = false;
  RunningScriptedServer server(options);
  Result r = run_bench(server, "--endpoint chat --concurrency 1 --requests 2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("gpufrac bench: --endpoint chat builds text prompts to the exact --isl "
                          "with the server's POST /tokenize, but "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("--endpoint completions --prompt ids"), std::string::npos) << r.output;
  EXPECT_EQ(server.requests_received(), 0);
}

TEST(BenchHelp, ExplainsEveryOptionWithExamples) {
  Result r = run_gpufrac("bench --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* option : {"--target",
                             "--endpoint",
                             "--prompt",
                             "Text prompts:",
                             "--endpoint chat --isl 512",
                             "--isl",
                             "--osl",
                             "--isl-stddev",
                             "--osl-stddev",
                             "--vocab-size",
                             "--seed",
                             "--concurrency",
                             "--requests",
                             "--warmup",
                             "--request-rate",
                             "--burstiness",
                             "--request-timeout",
                             "--out",
                             "--arm",
                             "--models-per-gpu",
                             "--gpus",
                             "--no-progress",
                             "Examples:",
                             "gpufrac bench --target"}) {
    EXPECT_NE(r.output.find(option), std::string::npos) << option;
  }
}

TEST(BenchFlags, MistakesNameTheFlag) {
  struct Case {
    const char* arguments;
    const char* message;
  } cases[] = {
      {"bench", "--target is required"},
      {"bench --target ftp://x", "--target"},
      {"bench --target http://127.0.0.1:1=m --concurrency 0", "--concurrency"},
      {"bench --target http://127.0.0.1:1=m --arm shared", "--arm"},
      {"bench --target http://127.0.0.1:1=m --request-rate 1 --concurrency 1,2", "cap"},
      {"bench --target http://127.0.0.1:1=m --burstiness 2", "--request-rate"},
      {"bench --target http://127.0.0.1:1=m --endpoint embeddings", "--endpoint"},
      {"bench --target http://127.0.0.1:1=m --isl 0", "--isl"},
      {"bench --target http://127.0.0.1:1=m --endpoint chat --prompt ids", "--prompt ids needs"},
      {"bench --target http://127.0.0.1:1=m --prompt words", "--prompt"},
  };
  for (const Case& c : cases) {
    Result r = run_gpufrac(c.arguments);
    EXPECT_EQ(r.exit_code, 2) << c.arguments << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.arguments << "\n" << r.output;
  }
}

TEST(BenchTargets, Syntax) {
  BenchTarget t = parse_target("http://127.0.0.1:8001=m0", Endpoint::kCompletions);
  EXPECT_EQ(t.model, "m0");
  EXPECT_EQ(t.url, "http://127.0.0.1:8001");
  EXPECT_EQ(t.endpoint.port, 8001);
  EXPECT_EQ(t.endpoint.path, "/v1/completions");
  t = parse_target("http://localhost:9000/v1/=Qwen/Qwen3-4B", Endpoint::kChat);
  EXPECT_EQ(t.model, "Qwen/Qwen3-4B");
  EXPECT_EQ(t.url, "http://localhost:9000");
  EXPECT_EQ(t.endpoint.path, "/v1/chat/completions");
  t = parse_target("http://10.0.0.5:8000/prefix", Endpoint::kCompletions);
  EXPECT_EQ(t.model, "");
  EXPECT_EQ(t.url, "http://10.0.0.5:8000/prefix");
  EXPECT_EQ(t.endpoint.path, "/prefix/v1/completions");
  EXPECT_THROW(parse_target("http://h:1=", Endpoint::kCompletions), UsageError);
}

TEST(BenchTargets, ModelFromServerOrAClearError) {
  ScriptedSseOptions options;
  options.models = {"a", "b"};
  RunningScriptedServer server(options);
  BenchTarget t = parse_target(server.url(), Endpoint::kCompletions);
  try {
    resolve_model(t);
    FAIL() << "two models must be ambiguous";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("serves 2 models (a, b)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpufrac
