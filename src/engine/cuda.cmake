# gpufrac_engine_cuda: the CUDA runner (kernels, cuBLASLt GEMMs, decode graphs, GPU sampler).
# Built only when the CUDA toolkit is found. cudart is linked statically and cuBLAS(Lt)
# dynamically, so one binary runs on any machine with a CUDA 13 driver and cuBLAS.
# Included by src/engine/CMakeLists.txt.
if(NOT GPUFRAC_HAVE_CUDA)
  return()
endif()

set(cuda_dir ${CMAKE_CURRENT_LIST_DIR}/cuda)
add_library(gpufrac_engine_cuda STATIC
  ${cuda_dir}/cuda_check.cpp
  ${cuda_dir}/device_buffer.cpp
  ${cuda_dir}/device_weights.cu
  ${cuda_dir}/step_inputs.cpp
  ${cuda_dir}/gemm.cpp
  ${cuda_dir}/layer_kernels.cu
  ${cuda_dir}/attention.cu
  ${cuda_dir}/attention_fast.cu
  ${cuda_dir}/gemv.cu
  ${cuda_dir}/gpu_sampler.cu
  ${cuda_dir}/cuda_runner.cpp
  ${cuda_dir}/cuda_forward.cpp
)
# CMake 3.25 knows no CUDA20 dialect for nvcc (the top level asks for it); the kernels need 17.
set_target_properties(gpufrac_engine_cuda PROPERTIES CUDA_RUNTIME_LIBRARY Static CUDA_STANDARD 17)
# -lineinfo: profilers and compute-sanitizer map time and faults to source lines.
target_compile_options(gpufrac_engine_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo -Xptxas=-warn-spills>)
target_link_libraries(gpufrac_engine_cuda PUBLIC gpufrac_engine_model CUDA::cudart_static
                      CUDA::cublasLt)

# The runner factory (gpufrac_engine_model) creates this runner for --device cuda|auto. The two
# static libraries name each other; CMake repeats them on the link line.
target_link_libraries(gpufrac_engine_model PUBLIC gpufrac_engine_cuda)
target_compile_definitions(gpufrac_engine_model PRIVATE GPUFRAC_HAVE_CUDA=1)
