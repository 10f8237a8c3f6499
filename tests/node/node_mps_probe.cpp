// node_mps_probe: a stand-in engine for the node's GPU suite (tests/gpu/node/run). It initialises
// CUDA before it reports healthy (so it is an MPS client by then, like an engine that has loaded
// its weights), serves /health and /v1/models like an engine, and GET /probe answers what this
// process's limits really are:
//   {"sm_attribute": cudaDevAttrMultiProcessorCount, "sms_reached": distinct SMs a kernel ran on,
//    "total_bytes", "free_bytes": cudaMemGetInfo, "cap_bytes": $GPUFRAC_NODE_MEMORY_BYTES,
//    "alloc_half_cap_ok": a cudaMalloc of cap/2 succeeded,
//    "alloc_over_cap_refused": a cudaMalloc of cap + 1 GiB failed}
// and GET /fault makes it fault: a kernel writes to an illegal address, and the process exits
// with code 3 once the error is reported (a crashing MPS client, for tests/gpu/resilience/run).
// With --fault it does that at once instead of serving (a foreign MPS client that faults).
// Usage: node_mps_probe --port PORT [--model NAME] | node_mps_probe --fault
#include <cuda_runtime.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>

#include "common/cli_args.h"
#include "common/http_server.h"
#include "common/json.h"
#include "common/strings.h"

int probe_distinct_sms(int blocks);
std::string provoke_illegal_address();

namespace {

gpufrac::Json probe(uint64_t cap) {
  int device = 0, sm_attribute = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sm_attribute, cudaDevAttrMultiProcessorCount, device);
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  void* half = nullptr;
  bool half_ok = cap > 0 && cudaMalloc(&half, cap / 2) == cudaSuccess;
  if (half) cudaFree(half);
  void* over = nullptr;
  cudaError_t over_result = cudaMalloc(&over, cap + (uint64_t(1) << 30));
  if (over) cudaFree(over);
  cudaGetLastError();  // an out-of-memory error is not sticky; clear it
  int sms_reached = probe_distinct_sms(4096);  // many more blocks than SMs: every reachable SM gets some
  return {{"sm_attribute", sm_attribute}, {"sms_reached", sms_reached},
          {"total_bytes", total_bytes},   {"free_bytes", free_bytes},
          {"cap_bytes", cap},             {"alloc_half_cap_ok", half_ok},
          {"alloc_over_cap_refused", over_result != cudaSuccess}};
}

}  // namespace

int main(int argc, char** argv) {
  gpufrac::CliArgs args("node_mps_probe --port PORT [--model NAME] | node_mps_probe --fault",
                        "A stand-in engine that reports the SM and memory limits it runs under.");
  args.option("port", "PORT", "Port to listen on.", "0")
      .option("model", "NAME", "Model name to serve.", "probe")
      .flag("fault", "Do not serve: fault (an illegal address) at once and exit 3.");
  try {
    if (!args.parse(argc, argv)) return 0;
  } catch (const std::exception& e) {
    std::cerr << "node_mps_probe: " << e.what() << "\n";
    return 2;
  }
  const char* cap_text = std::getenv("GPUFRAC_NODE_MEMORY_BYTES");
  uint64_t cap = cap_text ? std::strtoull(cap_text, nullptr, 10) : 0;
  if (cudaError_t e = cudaFree(nullptr); e != cudaSuccess) {  // create the context (MPS attach)
    std::cerr << "node_mps_probe: CUDA: " << cudaGetErrorString(e) << "\n";
    return 1;
  }
  // The fault: say what CUDA reported, then exit as a crashed client (3), or 1 if nothing faulted.
  auto fault = [] {
    std::string error = provoke_illegal_address();
    if (error.empty()) {
      std::cerr << "node_mps_probe: the write to an illegal address reported no error" << std::endl;
      std::_Exit(1);
    }
    std::cerr << "node_mps_probe: fault: " << error << std::endl;
    std::_Exit(3);
  };
  if (args.flag_set("fault")) fault();
  std::mutex gpu;  // one probe at a time
  std::string model = args.get("model");
  gpufrac::HttpServer server({"127.0.0.1", int(gpufrac::parse_int(args.get("port"), "--port"))});
  server.route("GET", "/health", [](const gpufrac::HttpRequest&, std::shared_ptr<gpufrac::HttpResponse> r) {
    r->send(200, "application/json", "{\"status\":\"ok\"}");
  });
  server.route("GET", "/v1/models", [&](const gpufrac::HttpRequest&, std::shared_ptr<gpufrac::HttpResponse> r) {
    r->send(200, "application/json", gpufrac::Json{{"object", "list"}, {"data", {{{"id", model}}}}}.dump());
  });
  server.route("GET", "/probe", [&](const gpufrac::HttpRequest&, std::shared_ptr<gpufrac::HttpResponse> r) {
    std::lock_guard lock(gpu);
    r->send(200, "application/json", probe(cap).dump());
  });
  server.route("GET", "/fault", [&](const gpufrac::HttpRequest&, std::shared_ptr<gpufrac::HttpResponse>) {
    std::lock_guard lock(gpu);
    fault();
  });
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  server.start();
  std::cout << "node_mps_probe " << model << " on port " << server.port() << std::endl;
  int sig = 0;
  sigwait(&signals, &sig);
  server.stop();
  return 0;
}
