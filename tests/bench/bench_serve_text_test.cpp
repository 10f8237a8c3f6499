// `gpufrac bench` text workloads against the real `gpufrac serve --model tiny --device cpu` (the
// Qwen3 tokenizer and chat template that scripts/install-deps fetches): every chat and completions
// prompt bench builds with the server's /tokenize is exactly as long as the server then counts it
// (usage.prompt_tokens), fixed or drawn per request. Against a server started with --api-key, bench
// sends its --api-key (or $OPENAI_API_KEY) on every call — the model lookup, /tokenize and the
// streams — and records its command line without the key. Both run as processes, as users run
// them.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

#include "common/http_client.h"
#include "common/json.h"
#include "common/raw_http_exchange.h"

extern char** environ;

namespace gpufrac {
namespace {

std::string gpufrac_bin() {
  const char* bin = std::getenv("GPUFRAC_BIN");
  return bin ? bin : "gpufrac";
}

// `gpufrac serve --model tiny` on the CPU (with `extra` arguments), up until the object goes
// (SIGTERM, reaped).
class TinyServer {
 public:
  explicit TinyServer(const std::vector<std::string>& extra = {}) : port_(testing::free_port()) {
    std::vector<std::string> args = {
        gpufrac_bin(),     "serve", "--model",         "tiny",
        "--device",        "cpu",   "--port",          std::to_string(port_),
        "--max-model-len", "1024",  "--memory-budget", "64M",
        "--threads",       "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (::posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ) != 0) pid_ = -1;
    for (int i = 0; i < 600 && pid_ > 0 && !http_get(url() + "/health", 1).ok(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ~TinyServer() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  bool up() const { return pid_ > 0 && http_get(url() + "/health", 1).ok(); }

 private:
  int port_;
  pid_t pid_ = -1;
};

struct BenchRun {
  int exit_code = -1;
  std::string output;
  std::vector<Json> records;
  Json summary;
};

// `environment`: NAME=VALUE words put before the command ("" for none).
BenchRun bench(const std::string& arguments, const std::string& out,
               const std::string& environment = "") {
  std::string command =
      environment + " " + gpufrac_bin() + " bench " + arguments + " --out " + out + " 2>&1";
  BenchRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) run.output.append(buffer, n);
  int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::string dir = out + "/dedicated-m1/c2";
  std::ifstream records(dir + "/records.jsonl");
  for (std::string line; std::getline(records, line);) run.records.push_back(Json::parse(line));
  std::ifstream summary(dir + "/summary.json");
  if (summary) run.summary = Json::parse(summary);
  return run;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class BenchServeText : public ::testing::Test {
 protected:
  explicit BenchServeText(const std::vector<std::string>& server_args = {})
      : server_(server_args) {}
  void SetUp() override {
    out_ =
        std::filesystem::temp_directory_path() / ("bench-serve-text-" + std::to_string(::getpid()));
    ASSERT_TRUE(server_.up()) << "gpufrac serve --model tiny did not come up at " << server_.url();
  }
  void TearDown() override { std::filesystem::remove_all(out_); }

  void expect_exact(const BenchRun& run, int requests) {
    ASSERT_EQ(run.exit_code, 0) << run.output;
    ASSERT_EQ(run.records.size(), size_t(requests)) << run.output;
    for (const Json& r : run.records) {
      EXPECT_EQ(r["status"], "ok") << r.dump();
      EXPECT_EQ(r["input_tokens"], r["requested_input_tokens"]) << r.dump();
      EXPECT_EQ(r["output_tokens"], 4) << r.dump();
      EXPECT_EQ(r["finish_reason"], "length") << r.dump();
    }
    EXPECT_EQ(run.summary["aggregate"]["input_token_mismatches"], 0);
  }

  TinyServer server_;
  std::string out_;
};

TEST_F(BenchServeText, ChatPromptsAreExactWithQwen3Template) {
  BenchRun run = bench("--target " + server_.url() +
                           "=tiny --endpoint chat --isl 200 --isl-stddev 40 --osl 4 "
                           "--concurrency 2 --requests 8 --warmup 1",
                       out_);
  expect_exact(run, 9);
  EXPECT_EQ(run.summary["config"]["endpoint"], "chat");
  std::set<int> lengths;
  for (const Json& r : run.records) lengths.insert(r["input_tokens"].get<int>());
  EXPECT_GT(lengths.size(), 4u);
}

TEST_F(BenchServeText, CompletionsTextPromptsAreExact) {
  BenchRun run = bench("--target " + server_.url() +
                           "=tiny --endpoint completions --prompt text --isl 300 --osl 4 "
                           "--concurrency 2 --requests 4 --warmup 0",
                       out_);
  expect_exact(run, 4);
  for (const Json& r : run.records) EXPECT_EQ(r["input_tokens"], 300);
}

class BenchServeTextWithKey : public BenchServeText {
 protected:
  BenchServeTextWithKey() : BenchServeText({"--api-key", "bench-key-7c1e"}) {}
};

TEST_F(BenchServeTextWithKey, TheKeyGoesWithEveryCallAndStaysOutOfTheFiles) {
  // No "=tiny": the model comes from GET /v1/models, which needs the key as well.
  const std::string workload =
      " --endpoint completions --prompt text --isl 120 --osl 4 "
      "--concurrency 2 --requests 4 --warmup 0";
  BenchRun with_flag =
      bench("--target " + server_.url() + workload + " --api-key bench-key-7c1e", out_);
  expect_exact(with_flag, 4);
  std::string command = with_flag.summary["config"]["cli_command"].get<std::string>();
  EXPECT_NE(command.find("--api-key ..."), std::string::npos) << command;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(out_)) {
    if (!entry.is_regular_file()) continue;
    EXPECT_EQ(read_all(entry.path()).find("bench-key-7c1e"), std::string::npos) << entry.path();
  }
  std::filesystem::remove_all(out_);

  BenchRun from_environment = bench("--target " + server_.url() + "=tiny" + workload, out_,
                                    "OPENAI_API_KEY=bench-key-7c1e");
  expect_exact(from_environment, 4);
  std::filesystem::remove_all(out_);

  BenchRun without = bench("--target " + server_.url() + workload, out_, "env -u OPENAI_API_KEY");
  EXPECT_NE(without.exit_code, 0) << without.output;
  EXPECT_NE(without.output.find("401"), std::string::npos) << without.output;
}

}  // namespace
}  // namespace gpufrac
