// `gpufrac bench` text workloads against the real `gpufrac serve --model tiny --device cpu` (the
// Qwen3 tokenizer and chat template that scripts/install-deps fetches): every chat and completions
// prompt bench builds with the server's /tokenize is exactly as long as the server then counts it
// (usage.prompt_tokens), fixed or drawn per request. Both run as processes, as users run them.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
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

// `gpufrac serve --model tiny` on the CPU, up until the object goes (SIGTERM, reaped).
class TinyServer {
 public:
  TinyServer() : port_(testing::free_port()) {
    std::vector<std::string> args = {
        gpufrac_bin(),     "serve", "--model",         "tiny",
        "--device",        "cpu",   "--port",          std::to_string(port_),
        "--max-model-len", "1024",  "--memory-budget", "64M",
        "--threads",       "1"};
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

BenchRun bench(const std::string& arguments, const std::string& out) {
  std::string command = gpufrac_bin() + " bench " + arguments + " --out " + out + " 2>&1";
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

class BenchServeText : public ::testing::Test {
 protected:
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

}  // namespace
}  // namespace gpufrac
