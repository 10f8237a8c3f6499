# gpufrac_engine_model: model configs, presets, safetensors loading, host weights, the CPU
# runner and the CPU sampler. Included by src/engine/CMakeLists.txt.
add_library(gpufrac_engine_model
  ${CMAKE_CURRENT_LIST_DIR}/model_config.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tensor.cpp
  ${CMAKE_CURRENT_LIST_DIR}/weights.cpp
  ${CMAKE_CURRENT_LIST_DIR}/safetensors.cpp
  ${CMAKE_CURRENT_LIST_DIR}/presets.cpp
  ${CMAKE_CURRENT_LIST_DIR}/model_loader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sampler.cpp
  ${CMAKE_CURRENT_LIST_DIR}/runner_factory.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/thread_pool.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/cpu_kernels.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/cpu_runner.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/host_memory.cpp
)
target_link_libraries(gpufrac_engine_model PUBLIC gpufrac_common)
# The hot loops: vectorised reductions (omp simd) at -O3, and the bf16 widening they feed on.
set_source_files_properties(
  ${CMAKE_CURRENT_LIST_DIR}/cpu/cpu_kernels.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tensor.cpp
  PROPERTIES COMPILE_OPTIONS "-O3;-fopenmp-simd")
