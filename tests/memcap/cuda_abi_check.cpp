// Built only where the CUDA toolkit is installed. Declares memcap/cuda_abi.h's and the fake
// driver's prototypes again after the toolkit's cuda.h: a prototype that differs from the
// toolkit's is a compile error ("conflicting declaration of C function"). And records the
// toolkit's layouts and constants for cuda_abi_test.cpp to compare.
#define __CUDA_API_VERSION_INTERNAL 1  // also declares the legacy (v1) entry points
#include <cuda.h>

#include "cuda_abi_facts.h"
#include "fakes/fake_libcuda.h"
#include "memcap/cuda_abi.h"

std::vector<uint64_t> toolkit_cuda_abi_facts() {
#define MEMCAP_FACT(expression) uint64_t(expression),
  return {MEMCAP_CUDA_ABI_FACTS(MEMCAP_FACT)};
#undef MEMCAP_FACT
}
