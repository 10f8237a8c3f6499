#include "engine/cuda/gpu_timing.h"

#include <algorithm>
#include <cmath>

#include "engine/cuda/cuda_check.h"

namespace gpufrac::engine {

namespace {

// Owns what one timing creates, whatever throws.
struct TimingResources {
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~TimingResources() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  }
};

}  // namespace

float best_ms_per_call(cudaStream_t stream, int calls, const std::function<void(int)>& call,
                       int runs) {
  TimingResources r;
  call(0);  // outside the capture: whatever the call sets up on first use (plans) happens here
  GPUFRAC_CUDA_CHECK(cudaStreamSynchronize(stream));
  GPUFRAC_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    for (int i = 1; i <= calls; ++i) call(i);
  } catch (...) {
    cudaStreamEndCapture(stream, &r.graph);
    throw;
  }
  GPUFRAC_CUDA_CHECK(cudaStreamEndCapture(stream, &r.graph));
  GPUFRAC_CUDA_CHECK(cudaGraphInstantiate(&r.exec, r.graph, 0));
  return best_graph_replay_ms(stream, r.exec, runs) / float(calls);
}

float best_graph_replay_ms(cudaStream_t stream, cudaGraphExec_t graph, int runs) {
  TimingResources r;
  GPUFRAC_CUDA_CHECK(cudaEventCreate(&r.start));
  GPUFRAC_CUDA_CHECK(cudaEventCreate(&r.stop));
  GPUFRAC_CUDA_CHECK(cudaGraphLaunch(graph, stream));  // the graph's first replay is slower
  float best = INFINITY;
  for (int run = 0; run < runs; ++run) {
    GPUFRAC_CUDA_CHECK(cudaEventRecord(r.start, stream));
    GPUFRAC_CUDA_CHECK(cudaGraphLaunch(graph, stream));
    GPUFRAC_CUDA_CHECK(cudaEventRecord(r.stop, stream));
    GPUFRAC_CUDA_CHECK(cudaEventSynchronize(r.stop));
    float ms = 0;
    GPUFRAC_CUDA_CHECK(cudaEventElapsedTime(&ms, r.start, r.stop));
    best = std::min(best, ms);
  }
  return best;
}

}  // namespace gpufrac::engine
