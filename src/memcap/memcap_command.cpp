#include "memcap/memcap_command.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "common/cli_args.h"
#include "common/error.h"
#include "common/strings.h"
#include "memcap/memcap_config.h"

namespace gpufrac {
namespace {

constexpr const char* kLibraryName = "libgpufrac_memcap.so";

// The shim's messages name its variables; here the user typed flags.
std::string in_flag_terms(std::string message) {
  // Longest names first: GPUFRAC_MEMCAP_POOL is a prefix of GPUFRAC_MEMCAP_POOL_BYTES.
  const std::pair<const char*, const char*> names[] = {
      {memcap::kEnvPoolBytes, "--pool-bytes"}, {memcap::kEnvFloorBytes, "--floor"},
      {memcap::kEnvBytes, "--bytes"},          {memcap::kEnvTenant, "--tenant"},
      {memcap::kEnvStateDir, "--state-dir"},   {memcap::kEnvPool, "--pool"}};
  for (const auto& [env, flag] : names) {
    for (size_t at = message.find(env); at != std::string::npos; at = message.find(env, at)) {
      message.replace(at, strlen(env), flag);
    }
  }
  return message;
}

std::string executable_dir() {
  char path[PATH_MAX];
  ssize_t length = readlink("/proc/self/exe", path, sizeof path - 1);
  if (length <= 0) return ".";
  std::string exe(path, size_t(length));
  return exe.substr(0, exe.rfind('/'));
}

std::string find_library() {
  std::string dir = executable_dir();
  std::vector<std::string> candidates = {dir + "/" + kLibraryName, dir + "/../lib/" + kLibraryName};
  for (const std::string& candidate : candidates) {
    char resolved[PATH_MAX];
    if (access(candidate.c_str(), R_OK) == 0 && realpath(candidate.c_str(), resolved)) {
      return resolved;
    }
  }
  throw RuntimeFailure(std::string("cannot find ") + kLibraryName + " in " + dir + " or " + dir +
                       "/../lib; build it (cmake --build ... --target gpufrac_memcap) or pass "
                       "--library PATH");
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string preload_with(const std::string& library) {
  const char* existing = getenv("LD_PRELOAD");
  if (existing == nullptr || existing[0] == '\0') return library;
  for (const std::string& entry : split(existing, ':')) {
    if (trim(entry) == library) return existing;  // already preloaded
  }
  return library + ":" + existing;  // first, so its symbols win
}

}  // namespace

int memcap_command(int argc, char** argv) {
  char default_dir[memcap::kMaxStateDirLength];
  memcap::default_state_dir(default_dir, sizeof default_dir);
  CliArgs args(
      "gpufrac memcap --bytes SIZE [--tenant NAME] [--state-dir DIR] -- COMMAND [ARGS...]",
      "Runs COMMAND with a hard cap on the GPU memory it may allocate, through the preloaded\n"
      "libgpufrac_memcap.so. Allocations past the cap fail with CUDA_ERROR_OUT_OF_MEMORY (torch:\n"
      "an OutOfMemoryError), and cudaMemGetInfo / torch.cuda.mem_get_info / NVML report the cap "
      "as\n"
      "the total and the cap minus what is in use as free, so engines that size themselves from\n"
      "the GPU (vLLM's --gpu-memory-utilization) size themselves from the cap. Processes the\n"
      "command starts inherit the cap and share it.");
  args.option("bytes", "SIZE",
              "The cap: one size for every GPU the command sees (10G), or per CUDA device "
              "ordinal (0=10G,1=20G; GPUs not listed are not capped). K/M/G/T are powers of "
              "1024, as in CUDA_MPS_PINNED_DEVICE_MEM_LIMIT.")
      .option("tenant", "NAME",
              "Processes with the same tenant (and state dir) share one cap, wherever they were "
              "started from. [default: memcap-PID, a cap of this run's own]")
      .option("floor", "SIZE",
              "Elastic memory: the tenant's floor in its GPU's pool (with --pool-bytes; --bytes "
              "is then its ceiling). No other tenant of the pool can take it. [default: 0]")
      .option("pool-bytes", "SIZE",
              "Elastic memory: the bytes that all pooled tenants of a GPU hold together, each "
              "counted as max(use, floor); give every tenant of a pool the same size.")
      .option("pool", "NAME",
              "The pool's name: tenants share a pool only on the same GPU, state dir and name. "
              "[default: gpu]")
      .option("state-dir", "DIR", "Where the tenants' shared ledgers live.", default_dir)
      .option("library", "PATH",
              "The shim to preload. [default: libgpufrac_memcap.so beside the gpufrac binary, "
              "or in ../lib]")
      .flag("verbose", "Log every refused allocation to stderr (by default only the first).")
      .flag("print-env",
            "Print the variables as shell 'export' lines instead of running a command, for "
            "your own launcher.")
      .allow_passthrough("The command to run under the cap, with its arguments.")
      .section("Examples",
               "  gpufrac memcap --bytes 20G -- python -c 'import torch; "
               "print(torch.cuda.mem_get_info())'\n"
               "      prints (21474836480, 21474836480): a 20 GiB GPU, nothing of it in use yet.\n"
               "  gpufrac memcap --bytes 0=40G --tenant qwen3 -- vllm serve Qwen/Qwen3-4B "
               "--gpu-memory-utilization 0.9\n"
               "      vLLM sees a 40 GiB GPU 0 and uses 90% of it; a second command with "
               "--tenant qwen3\n"
               "      shares the same 40 GiB.\n"
               "  eval \"$(gpufrac memcap --bytes 10G --tenant a --print-env)\"; ./my_cuda_app\n"
               "      caps ./my_cuda_app (and anything else this shell starts) at 10 GiB.\n"
               "  gpufrac memcap --bytes 40G --floor 9G --pool-bytes 70G --tenant a -- ./serve_a\n"
               "      ./serve_a keeps 9 GiB for itself and grows up to 40 GiB while the other\n"
               "      tenants of the GPU's 70 GiB pool (started the same way) leave room.")
      .section("Environment the shim reads (set by this command)",
               "  LD_PRELOAD                 the shim, first\n"
               "  GPUFRAC_MEMCAP_BYTES       --bytes\n"
               "  GPUFRAC_MEMCAP_TENANT      --tenant\n"
               "  GPUFRAC_MEMCAP_STATE_DIR   --state-dir\n"
               "  GPUFRAC_MEMCAP_FLOOR_BYTES --floor\n"
               "  GPUFRAC_MEMCAP_POOL_BYTES  --pool-bytes\n"
               "  GPUFRAC_MEMCAP_POOL        --pool\n"
               "  GPUFRAC_MEMCAP_VERBOSE     1 with --verbose\n"
               "  An invalid value, or a state dir that cannot be used, makes the shim refuse "
               "CUDA\n  (with the reason on stderr) instead of running without the cap.")
      .section("Details", "  docs/memcap.md: what is counted, how processes share a cap, limits.");
  if (!args.parse(argc, argv)) return 0;

  const bool print_env = args.flag_set("print-env");
  if (!print_env && args.passthrough().empty()) {
    throw UsageError("give the command to run after '--': gpufrac memcap --bytes 10G -- COMMAND");
  }
  std::string bytes = args.get("bytes");
  std::string tenant =
      args.given("tenant") ? args.get("tenant") : "memcap-" + std::to_string(getpid());
  std::string state_dir = args.get("state-dir");
  const std::pair<const char*, const char*> pool_flags[] = {{"floor", memcap::kEnvFloorBytes},
                                                            {"pool-bytes", memcap::kEnvPoolBytes},
                                                            {"pool", memcap::kEnvPool}};
  auto given_or_empty = [&](const char* flag) {
    return args.given(flag) ? args.get(flag) : std::string();
  };
  memcap::MemcapConfig config;
  char error[1024];
  if (bytes.empty() ||
      !memcap::parse_memcap_config(bytes.c_str(), tenant.c_str(), state_dir.c_str(), nullptr,
                                   &config, error, sizeof error) ||
      !memcap::parse_memcap_pool(given_or_empty("floor").c_str(),
                                 given_or_empty("pool-bytes").c_str(),
                                 given_or_empty("pool").c_str(), &config, error, sizeof error)) {
    throw UsageError(bytes.empty() ? "--bytes needs a size, e.g. --bytes 10G"
                                   : in_flag_terms(error));
  }
  std::string library = args.given("library") ? args.get("library") : find_library();
  if (library.empty() || library[0] != '/' || access(library.c_str(), R_OK) != 0) {
    throw UsageError("--library '" + library + "' is not a readable absolute path to " +
                     kLibraryName);
  }

  std::vector<std::pair<std::string, std::string>> environment = {
      {"LD_PRELOAD", preload_with(library)},
      {memcap::kEnvBytes, bytes},
      {memcap::kEnvTenant, tenant},
      {memcap::kEnvStateDir, state_dir},
  };
  for (const auto& [flag, env] : pool_flags) {
    if (args.given(flag)) environment.emplace_back(env, args.get(flag));
  }
  if (args.flag_set("verbose")) environment.emplace_back(memcap::kEnvVerbose, "1");
  if (print_env) {
    for (const auto& [name, value] : environment) {
      std::cout << "export " << name << "=" << shell_quote(value) << "\n";
    }
    return 0;
  }
  for (const auto& [name, value] : environment) setenv(name.c_str(), value.c_str(), 1);
  std::vector<char*> command;
  for (const std::string& word : args.passthrough()) {
    command.push_back(const_cast<char*>(word.c_str()));
  }
  command.push_back(nullptr);
  execvp(command[0], command.data());
  throw RuntimeFailure("cannot run '" + args.passthrough()[0] + "': " + strerror(errno));
}

}  // namespace gpufrac
