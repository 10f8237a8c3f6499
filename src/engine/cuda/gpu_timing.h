// Start-up timing of competing kernels on the runner's stream: what the linear-kernel choices
// (the GEMV against cuBLASLt, cuBLASLt's candidate algorithms) are decided by.
// Synchronizes the stream; not for use during graph capture. Not thread-safe per stream.
#pragma once

#include <cuda_runtime.h>

#include <functional>

namespace gpufrac::engine {

// Runs call(0) untimed, captures call(1) .. call(calls) into a CUDA graph (as the decode steps
// run: no launch gaps) and returns the best of `runs` replays in GPU ms per call (events on
// `stream`). The index lets each call take different operands (a layer's own weights: one
// weight called again and again would be served from L2). The calls must be capturable.
float best_ms_per_call(cudaStream_t stream, int calls, const std::function<void(int)>& call,
                       int runs = 3);

// The best of `runs` replays of `graph` on `stream`, in GPU ms (after one untimed replay).
float best_graph_replay_ms(cudaStream_t stream, cudaGraphExec_t graph, int runs = 5);

}  // namespace gpufrac::engine
