// Nodes on fake GPUs, for the node tests that need GPUs: the fake NVML
// (tests/fakes/fake_nvml_node.cpp, built as FAKE_NVML_NODE; FAKE_NVML_GPUS GPUs of an H200's
// 143771 MiB, GPU i with UUID fake_gpu_uuid(i)) and the fake nvidia-cuda-mps-control
// (tests/fakes/fake_mps_control.py, which records in <pipe dir>/commands.log every command it was
// sent and in <pipe dir>/daemon.json the environment it started with). FakeGpuNode writes node
// specs whose run directory is a fresh temporary directory and reads what each GPU's daemon
// recorded there.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "fake_engine_spec.h"
#include "node/node_spec.h"
#include "node/supervisor.h"

namespace gpufrac::testing {

// The fake driver for this process and the processes it starts, with `gpus` GPUs. Call it before
// anything loads NVML (in a static initializer); the GPU count may change later, before a node
// comes up, since the fake reads FAKE_NVML_GPUS at every call.
inline bool use_fake_driver(int gpus) {
  ::setenv("GPUFRAC_NVML_LIBRARY", FAKE_NVML_NODE, 1);
  ::setenv("FAKE_NVML_GPUS", std::to_string(gpus).c_str(), 1);
  return true;
}

inline std::string fake_gpu_uuid(int index) {
  char uuid[64];
  std::snprintf(uuid, sizeof uuid, "GPU-00000000-0000-0000-0000-%012d", index);
  return uuid;
}

class FakeGpuNode : public ::testing::Test {
 protected:
  // A node spec named "g" over the fake GPUs; `extra` adds top-level fields (gpus, mode, ...).
  NodeSpec spec(const std::string& models, const std::string& extra = "") {
    std::string mode = extra.find("mode:") == std::string::npos ? "mode: fractions\n" : "";
    return parse_node_spec(spec_yaml(models, mode + extra), "spec.yaml");
  }
  std::string spec_yaml(const std::string& models, const std::string& extra) {
    return "name: g\nlisten: 127.0.0.1:0\ndevice: cuda\nrun_dir: " + run_dir() +
           "\nstop_timeout: 3s\nmps_control: " + fake_path("fake_mps_control.py") + "\n" + extra +
           "models:\n" + models;
  }
  std::string run_dir() const { return dir_.path() + "/run"; }
  std::string pipe_dir(int gpu) const {
    return run_dir() + "/mps/gpu" + std::to_string(gpu) + "/pipe";
  }
  std::string log_dir(int gpu) const {
    return run_dir() + "/mps/gpu" + std::to_string(gpu) + "/log";
  }
  // Every command GPU `gpu`'s daemon was sent, in order.
  std::vector<std::string> commands(int gpu) const {
    std::vector<std::string> lines;
    std::istringstream in(read_file(pipe_dir(gpu) + "/commands.log"));
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
  static const InstanceStatus& instance(const std::vector<InstanceStatus>& all,
                                        const std::string& name) {
    for (const InstanceStatus& s : all) {
      if (s.name == name) return s;
    }
    throw std::runtime_error("no instance " + name);
  }
  TempDir dir_;
};

}  // namespace gpufrac::testing
