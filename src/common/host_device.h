// GPUFRAC_HOST_DEVICE marks a function that host code and CUDA kernels share (one copy of a
// formula for both): __host__ __device__ when nvcc compiles it, nothing otherwise. Headers that use
// it stay C++17 and free of host-only headers, so .cu files can include them.
#pragma once

#if defined(__CUDACC__)
#define GPUFRAC_HOST_DEVICE __host__ __device__
#else
#define GPUFRAC_HOST_DEVICE
#endif
