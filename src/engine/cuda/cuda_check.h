// Error checks for CUDA runtime and cuBLAS calls. A failing call throws RuntimeFailure with one
// line naming the call, where it was made and the driver's message, so a broken launch never goes
// unnoticed (exit code 0 proves nothing on a GPU). Also the driver API's entry points, found
// through the runtime (no link against libcuda). Host-side only; thread-safe.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

namespace gpufrac::engine {

[[noreturn]] void throw_cuda_failure(const char* call, const char* file, int line,
                                     const char* message);

inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) throw_cuda_failure(call, file, line, cudaGetErrorString(status));
}

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line);

// The driver API function `name` (CUDA 12.0 ABI) through cudaGetDriverEntryPointByVersion;
// throws RuntimeFailure "<purpose>: the driver has no <name>" when it has none.
void* driver_entry_point(const char* name, const char* purpose);

}  // namespace gpufrac::engine

#define GPUFRAC_CUDA_CHECK(call) ::gpufrac::engine::check_cuda((call), #call, __FILE__, __LINE__)
#define GPUFRAC_CUBLAS_CHECK(call) \
  ::gpufrac::engine::check_cublas((call), #call, __FILE__, __LINE__)
// After a kernel launch: catches bad launch configurations at once (asynchronous faults surface
// at the next synchronising call, which is checked too).
#define GPUFRAC_LAUNCH_CHECK() GPUFRAC_CUDA_CHECK(cudaPeekAtLastError())
