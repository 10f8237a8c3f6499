# gpufrac_engine: the serving half of the engine — KV block allocator, scheduler, engine loop,
# metrics, OpenAI request parsing and server, and the `serve` command. Included by
# src/engine/CMakeLists.txt after model.cmake.
add_library(gpufrac_engine
  ${CMAKE_CURRENT_LIST_DIR}/kv_block_allocator.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sequence.cpp
  ${CMAKE_CURRENT_LIST_DIR}/scheduler.cpp
  ${CMAKE_CURRENT_LIST_DIR}/engine.cpp
  ${CMAKE_CURRENT_LIST_DIR}/metrics.cpp
  ${CMAKE_CURRENT_LIST_DIR}/completion_request.cpp
  ${CMAKE_CURRENT_LIST_DIR}/openai_server.cpp
)
target_link_libraries(gpufrac_engine PUBLIC gpufrac_common)
# `serve` needs a real runner (create_model_runner), which the model library provides.
if(TARGET gpufrac_engine_model)
  target_sources(gpufrac_engine PRIVATE ${CMAKE_CURRENT_LIST_DIR}/serve_command.cpp)
  target_link_libraries(gpufrac_engine PUBLIC gpufrac_engine_model)
endif()
