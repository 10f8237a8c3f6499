// The CPU backend of ModelRunner (runner.h): the reference forward pass in fp32, multi-threaded
// over rows, used to serve without a GPU and as the oracle the CUDA runner is checked against.
//
// - Weights stay in their stored dtype and are converted to fp32 a tile at a time; norm weights
//   and biases are kept as fp32 copies.
// - KV cache: fp32, laid out [layer][K|V][block][slot in block][kv head][head_dim].
// - Numerics: RMSNorm variance in fp32, q/k norm before RoPE, RoPE angles pos * inv_freq in
//   double (exact to fp32; Hugging Face rounds them in fp32), softmax in fp32 with the max
//   subtracted, logits only for rows that sample.
// - Each output value is computed the same way whatever the batch, chunking or thread count, so
//   a sequence's logits do not depend on what else shares its step.
// - A step runs inside submit() (SynchronousRunner, synchronous_runner.h). It validates the
//   batch first (token ids, block tables, KV allocated) and throws RuntimeFailure without
//   touching the cache when something is wrong.
// - With a turn lock (common/turn_lock.h), each step after validation runs holding it: runners of
//   several processes given the same file compute one at a time, as time-sliced GPU contexts.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/model/runner.h"
#include "engine/model/weights.h"

namespace gpufrac::engine {

// `threads` counts all worker threads (0: every CPU this process may run on). `turn_lock_path`:
// the file of the TurnLock each step holds (--cpu-turn-lock); empty: none.
std::unique_ptr<ModelRunner> make_cpu_runner(ModelWeights weights, int threads,
                                             const std::string& turn_lock_path = {});

}  // namespace gpufrac::engine
