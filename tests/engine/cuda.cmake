# GPU tests and the benchmark of the CUDA runner (label gpu: scripts/gpu-check runs them on a GPU
# machine; CI builds them but never runs them). Included by tests/engine/CMakeLists.txt.
if(NOT GPUFRAC_HAVE_CUDA)
  return()
endif()

gpufrac_test(cuda_kernels_test LABEL gpu SOURCES cuda_kernels_test.cpp LIBS gpufrac_engine_cuda)
gpufrac_test(cuda_fast_path_test LABEL gpu SOURCES cuda_fast_path_test.cpp LIBS gpufrac_engine_cuda)
gpufrac_test(cuda_sampling_test LABEL gpu SOURCES cuda_sampling_test.cpp LIBS gpufrac_engine_cuda)
gpufrac_test(cuda_runner_test LABEL gpu SOURCES cuda_runner_test.cpp LIBS gpufrac_engine)
gpufrac_test(cuda_reference_test LABEL gpu SOURCES cuda_reference_test.cpp
             LIBS gpufrac_engine_cuda TIMEOUT 900)

# Decode/prefill timings against the bandwidth and FLOP floors (a plain program: it times with
# CUDA events and must run where Google Benchmark's shared library is not installed).
add_executable(gpufrac_cuda_bench cuda_bench.cpp)
target_link_libraries(gpufrac_cuda_bench PRIVATE gpufrac_engine_cuda)
