# Tests of gpufrac_engine_model (src/engine/model/ and cpu/, and the runner factory). All unit: no processes, no GPU.
gpufrac_test(engine_model_test LABEL unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/model_config_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/cpu_runner_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/cpu_turn_lock_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/host_memory_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/sampler_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/model_safetensors_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/model_presets_test.cpp
  LIBS gpufrac_engine GTest::gmock)

# CPU forward, weight generation and sampling costs (a performance reference, not run by CI).
find_package(benchmark QUIET)
if(benchmark_FOUND)
  add_executable(cpu_forward_bench ${CMAKE_CURRENT_LIST_DIR}/cpu_forward_bench.cpp)
  target_link_libraries(cpu_forward_bench PRIVATE gpufrac_engine_cpu benchmark::benchmark)
endif()
