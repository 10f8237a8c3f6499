// Layouts and constants of the CUDA driver ABI that memcap/cuda_abi.h restates. Expanded once
// against the toolkit's cuda.h (cuda_abi_check.cpp) and once against memcap/cuda_abi.h
// (cuda_abi_test.cpp), so that a test can compare the two lists.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <vector>

#define MEMCAP_CUDA_ABI_FACTS(X)                        \
  X(sizeof(CUresult))                                   \
  X(sizeof(CUdevice))                                   \
  X(sizeof(CUdeviceptr))                                \
  X(sizeof(CUmemGenericAllocationHandle))               \
  X(sizeof(CUuuid))                                     \
  X(sizeof(CUmemLocation))                              \
  X(offsetof(CUmemLocation, id))                        \
  X(sizeof(CUmemAllocationProp))                        \
  X(offsetof(CUmemAllocationProp, location))            \
  X(offsetof(CUmemAllocationProp, win32HandleMetaData)) \
  X(offsetof(CUmemAllocationProp, allocFlags))          \
  X(sizeof(CUmemPoolProps))                             \
  X(offsetof(CUmemPoolProps, location))                 \
  X(offsetof(CUmemPoolProps, maxSize))                  \
  X(sizeof(CUmemAccessDesc))                            \
  X(CUDA_SUCCESS)                                       \
  X(CUDA_ERROR_INVALID_VALUE)                           \
  X(CUDA_ERROR_OUT_OF_MEMORY)                           \
  X(CUDA_ERROR_NOT_INITIALIZED)                         \
  X(CUDA_ERROR_INVALID_DEVICE)                          \
  X(CUDA_ERROR_INVALID_CONTEXT)                         \
  X(CUDA_ERROR_NOT_FOUND)                               \
  X(CUDA_ERROR_NOT_PERMITTED)                           \
  X(CUDA_ERROR_NOT_SUPPORTED)                           \
  X(CU_MEM_LOCATION_TYPE_DEVICE)                        \
  X(CU_MEM_LOCATION_TYPE_HOST)                          \
  X(CU_MEM_LOCATION_TYPE_HOST_NUMA)                     \
  X(CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT)             \
  X(CU_MEM_ALLOCATION_TYPE_PINNED)                      \
  X(CU_MEM_ALLOCATION_TYPE_MANAGED)                     \
  X(CU_GET_PROC_ADDRESS_LEGACY_STREAM)                  \
  X(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)      \
  X(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT)

// The list expanded against the toolkit's cuda.h; empty when the toolkit is not installed.
std::vector<uint64_t> toolkit_cuda_abi_facts();
