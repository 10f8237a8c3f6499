// Kernel launches that may overlap the previous kernel on the stream (programmatic dependent
// launch, Hopper and later): the decode chain's kernels are short, and without it each one's
// blocks start only after the previous kernel has drained, so every boundary costs the launch
// latency and the ramp of the next kernel's first memory requests.
//
// Contract of a kernel launched with `overlap`:
// - it may start while the previous kernel on the stream still runs; before
//   wait_for_previous_grid() it reads only memory no kernel of the step writes (weights) and
//   writes nothing (the decode attention kernel bends this in two cases, with the reasons
//   written beside it, attention_fast.cu: beside the flash kernel, and copying K/V of earlier
//   steps before the qkv projection it waits for);
// - wait_for_previous_grid() returns once the previous kernel has completed and its writes are
//   visible (and, since that kernel waited likewise, every earlier one);
// - allow_next_grid_launch() (after the wait) lets the next overlapping kernel's blocks be
//   scheduled once every block of this one has called it.
// Both are no-ops before sm_90 and when the kernel was launched without `overlap`, so kernels
// call them unconditionally. Included by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "engine/cuda/cuda_check.h"

namespace gpufrac::engine {

__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_next_grid_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kernel<<<grid, block, shared, stream>>>(args...), with programmatic stream serialization when
// `overlap` is set; throws RuntimeFailure when the launch is refused.
template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared,
                   cudaStream_t stream, bool overlap, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  config.attrs = overlap ? &attribute : nullptr;
  config.numAttrs = overlap ? 1 : 0;
  GPUFRAC_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace gpufrac::engine
