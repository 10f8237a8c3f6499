#include "k8s/exec_command.h"

#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "common/cli_args.h"
#include "common/error.h"
#include "common/strings.h"
#include "k8s/agent_layout.h"
#include "k8s/exec_run.h"
#include "node/gpus.h"
#include "node/model_launch.h"
#include "node/process.h"

namespace gpufrac::k8s {
namespace {

constexpr const char* kStateDirTemplate = "/tmp/gpufrac-exec-XXXXXX";

SharingMode parse_mode(const std::string& text) {
  if (text == "fractions") return SharingMode::kFractions;
  if (text == "timeslice") return SharingMode::kTimeslice;
  if (text == "dedicated") return SharingMode::kDedicated;
  throw UsageError("--mode: '" + text + "' is not a mode; use fractions, timeslice or dedicated");
}

std::string memcap_library(const CliArgs& args) {
  if (args.given("memcap-library")) {
    std::string path = args.get("memcap-library");
    if (!std::filesystem::exists(path))
      throw UsageError("--memcap-library: " + path + " does not exist");
    return std::filesystem::absolute(path).string();
  }
  NodeSpec defaults;
  std::error_code ec;
  return find_memcap_library(defaults,
                             std::filesystem::read_symlink("/proc/self/exe", ec).string());
}

// The GPU's memory as NVML reports it (0 when NVML is missing or does not know the GPU); in
// dedicated mode without a UUID, the one GPU the container sees.
uint64_t gpu_memory_bytes(PodGpuEnv& pod) {
  MachineInventory machine = discover_machine();
  for (const GpuInfo& gpu : machine.gpus) {
    if (pod.gpu_uuid.empty() || gpu.uuid == pod.gpu_uuid) {
      if (pod.gpu_uuid.empty() && machine.gpus.size() == 1) pod.gpu_uuid = gpu.uuid;
      return gpu.memory_total;
    }
  }
  return 0;
}

std::string shell_quote(const std::string& arg) {
  bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_./=:,+@%-").find(c) != std::string_view::npos;
  });
  if (plain) return arg;
  std::string quoted = "'";
  for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

int exec_command(int argc, char** argv) {
  CliArgs args(
      "gpufrac k8s exec [OPTIONS] -- COMMAND...",
      "The entrypoint of a model container on a KAI-scheduled cluster: reads the GPU and\n"
      "fraction KAI gave the pod (NVIDIA_VISIBLE_DEVICES, GPU_PORTION) and what the rendered\n"
      "pod adds (GPUFRAC_GPU_MEMORY_MIB, GPUFRAC_SM_SHARE), runs COMMAND on the node agent's\n"
      "MPS daemon of that GPU with its SM share and memory cap (MPS limits + the memcap shim),\n"
      "and fails closed: once the engine is healthy it must be an MPS client of that daemon,\n"
      "or it is stopped and exec exits 1. Missing or malformed variables are one line each.");
  args.option("mode", "MODE",
              "fractions (MPS + cap), timeslice (cap only) or dedicated (whole GPU).", "fractions")
      .option("agent-root", "DIR", "The node agent's host directory, mounted at the same path.",
              kDefaultAgentRoot)
      .option("health-url", "URL", "The engine's health URL: 200 means it is ready.",
              "http://127.0.0.1:" + std::to_string(kEnginePort) + "/health")
      .option("startup-timeout", "DURATION", "How long the engine may take to become healthy.",
              "600s")
      .option("stop-timeout", "DURATION", "How long the engine gets after SIGTERM before SIGKILL.",
              "10s")
      .option("agent-timeout", "DURATION",
              "How long to wait for the agent's MPS daemon before giving up.", "120s")
      .option("context-reserve", "BYTES",
              "Memory kept back from a GPU_PORTION cap for the CUDA context.", "512M")
      .option("memcap-library", "PATH",
              "The memcap shim [default: libgpufrac_memcap.so beside gpufrac].")
      .flag("dry-run", "Print the variables exec would set (NAME=value) and the command, and exit.")
      .allow_passthrough(
          "The engine's command line; {gpu}, {gpu_uuid}, {memory_bytes} and "
          "{gpu_memory_utilization} are filled in.")
      .section("Example",
               "  NVIDIA_VISIBLE_DEVICES=GPU-5a7c0d2e-... GPU_PORTION=0.25 "
               "GPUFRAC_GPU_MEMORY_MIB=20000 \\\n"
               "    gpufrac k8s exec --dry-run -- gpufrac serve --model qwen3-4b --port 8000\n"
               "  # CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25, "
               "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20000M, ...");
  if (!args.parse(argc, argv)) return 0;
  ExecOptions options;
  options.mode = parse_mode(args.get("mode"));
  options.agent_root = args.get("agent-root");
  options.context_reserve_bytes = parse_bytes(args.get("context-reserve"), "--context-reserve");
  options.memcap_library = memcap_library(args);
  bool dry_run = args.flag_set("dry-run");

  PodGpuEnv pod =
      read_pod_gpu_env([](const char* name) { return std::getenv(name); }, options.mode);
  uint64_t memory = gpu_memory_bytes(pod);
  std::string state_dir = kStateDirTemplate;
  if (!dry_run && !::mkdtemp(state_dir.data()))
    throw RuntimeFailure("cannot create " + std::string(kStateDirTemplate));
  struct RemoveStateDir {
    std::string path;
    bool active;
    ~RemoveStateDir() {
      std::error_code ec;
      if (active) std::filesystem::remove_all(path, ec);
    }
  } cleanup{state_dir, !dry_run};
  options.state_dir = state_dir;

  ExecRun run;
  run.plan = plan_exec(pod, options, memory, args.passthrough(), current_environment());
  run.options = options;
  if (dry_run) {
    for (const auto& [name, value] : run.plan.set) std::cout << name << "=" << value << "\n";
    std::cout << "command:";
    for (const std::string& arg : run.plan.argv) std::cout << " " << shell_quote(arg);
    std::cout << "\n";
    return 0;
  }
  run.health_url = args.get("health-url");
  run.startup_timeout_s = parse_seconds(args.get("startup-timeout"), "--startup-timeout");
  run.stop_timeout_s = parse_seconds(args.get("stop-timeout"), "--stop-timeout");
  run.agent_timeout_s = parse_seconds(args.get("agent-timeout"), "--agent-timeout");
  return run_exec(run);
}

}  // namespace gpufrac::k8s
