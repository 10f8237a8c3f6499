# Tests of the serving half of the engine (src/engine/ and src/engine/api/), mostly on a fake runner.
add_library(gpufrac_fake_runner STATIC ${CMAKE_SOURCE_DIR}/tests/fakes/fake_runner.cpp)
target_include_directories(gpufrac_fake_runner PUBLIC ${CMAKE_SOURCE_DIR}/tests)
target_link_libraries(gpufrac_fake_runner PUBLIC gpufrac_common)

gpufrac_test(engine_serving_unit_test LABEL unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/kv_block_allocator_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/scheduler_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/logit_adjustment_table_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/engine_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/engine_sampling_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/engine_stop_request_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/metrics_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/request_parse_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/fuzz_request_parser_test.cpp
  LIBS gpufrac_engine_api gpufrac_fake_runner)

# The OpenAI server over real sockets, on the fake runner, in-process.
gpufrac_test(engine_server_test LABEL integration
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/server_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/fuzz_server_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/metrics_server_test.cpp
  LIBS gpufrac_engine_api gpufrac_fake_runner)

# `gpufrac serve` as a process: many concurrent clients, disconnects, no KV leak. On the CPU
# with the tiny preset in CI; on CUDA with qwen3-0.6b and --memory-budget auto (gpu label).
gpufrac_test(engine_serve_tiny_test LABEL integration TIMEOUT 600
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/server_process_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/serve_api_key_test.cpp
  LIBS gpufrac_common)
if(GPUFRAC_HAVE_CUDA)
  gpufrac_test(engine_serve_cuda_test LABEL gpu TIMEOUT 900
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/server_process_test.cpp
    LIBS gpufrac_common)
  target_compile_definitions(engine_serve_cuda_test PRIVATE SERVE_SUITE=ServeCuda SERVE_MODEL="qwen3-0.6b"
                             SERVE_DEVICE="cuda" SERVE_MEMORY_BUDGET="auto")
endif()

# Text in, text out on the real Qwen3 tokenizer (scripts/install-deps): request parsing for text
# prompts, chat and /tokenize, and GeneratedText (unit); the server's text endpoints over sockets
# on a fake runner (integration). Engine::stop_request is in engine_serving_unit_test.
gpufrac_test(engine_text_unit_test LABEL unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/text_request_test.cpp
  LIBS gpufrac_engine_api)
gpufrac_test(engine_text_server_test LABEL integration
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/text_server_test.cpp
  LIBS gpufrac_engine_api gpufrac_fake_runner)
# The official `openai` npm client against `gpufrac serve --model tiny` (node, scripts/install-deps).
gpufrac_test(engine_openai_client_test LABEL integration TIMEOUT 300
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/openai_client_test.cpp
  LIBS gpufrac_tokenizer)

# Benchmarks (performance targets, not run by CI): the scheduler step's CPU cost.
find_package(benchmark QUIET)
if(benchmark_FOUND)
  add_executable(scheduler_bench ${CMAKE_CURRENT_LIST_DIR}/scheduler_bench.cpp)
  target_link_libraries(scheduler_bench PRIVATE gpufrac_engine benchmark::benchmark)
  # The engine's whole per-step overhead (no runner time), with and without HTTP streaming.
  add_executable(engine_loop_bench ${CMAKE_CURRENT_LIST_DIR}/engine_loop_bench.cpp)
  target_include_directories(engine_loop_bench PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  target_link_libraries(engine_loop_bench PRIVATE gpufrac_engine_api gpufrac_fake_runner
                                                  benchmark::benchmark)
endif()
