// memcap/cuda_abi.h restates part of the CUDA driver ABI so the shim builds without the toolkit;
// where the toolkit is installed, its layouts and constants must agree (the prototypes are
// compared at compile time by cuda_abi_check.cpp).
#include "memcap/cuda_abi.h"

#include <gtest/gtest.h>

#include "cuda_abi_facts.h"
#include "fakes/fake_libcuda.h"

namespace {

std::vector<uint64_t> memcap_cuda_abi_facts() {
#define MEMCAP_FACT(expression) uint64_t(expression),
  return {MEMCAP_CUDA_ABI_FACTS(MEMCAP_FACT)};
#undef MEMCAP_FACT
}

TEST(CudaAbi, MatchesTheToolkitHeaders) {
#ifndef GPUFRAC_HAVE_CUDA_H
  GTEST_SKIP() << "the CUDA toolkit's cuda.h is not installed here";
#else
  std::vector<uint64_t> toolkit = toolkit_cuda_abi_facts();
  std::vector<uint64_t> memcap = memcap_cuda_abi_facts();
  ASSERT_EQ(toolkit.size(), memcap.size());
  for (size_t i = 0; i < toolkit.size(); ++i) {
    EXPECT_EQ(toolkit[i], memcap[i]) << "fact #" << i << " of MEMCAP_CUDA_ABI_FACTS";
  }
#endif
}

TEST(CudaAbi, NvmlMemoryV2VersionIsTheStructSizeAndVersion2) {
  // nvml.h: NVML_STRUCT_VERSION(Memory, 2) == sizeof(nvmlMemory_v2_t) | 2 << 24 == 0x02000028.
  EXPECT_EQ(sizeof(nvmlMemory_v2_t), 40u);
  EXPECT_EQ(GPUFRAC_NVML_MEMORY_V2_VERSION, 0x02000028u);
}

}  // namespace
