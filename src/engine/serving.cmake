# gpufrac_engine: the serving half of the engine — KV block allocator, scheduler, engine loop,
# metrics, OpenAI request parsing (completions, chat, tokenize) and server, and the `serve`
# command. Included by src/engine/CMakeLists.txt after model.cmake and tokenizer.cmake.
add_library(gpufrac_engine
  ${CMAKE_CURRENT_LIST_DIR}/kv_block_allocator.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sequence.cpp
  ${CMAKE_CURRENT_LIST_DIR}/scheduler.cpp
  ${CMAKE_CURRENT_LIST_DIR}/engine.cpp
  ${CMAKE_CURRENT_LIST_DIR}/metrics.cpp
  ${CMAKE_CURRENT_LIST_DIR}/request_fields.cpp
  ${CMAKE_CURRENT_LIST_DIR}/served_tokenizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/completion_request.cpp
  ${CMAKE_CURRENT_LIST_DIR}/chat_request.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tokenize_request.cpp
  ${CMAKE_CURRENT_LIST_DIR}/generated_text.cpp
  ${CMAKE_CURRENT_LIST_DIR}/openai_server_sinks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/openai_server.cpp
)
target_link_libraries(gpufrac_engine PUBLIC gpufrac_common gpufrac_tokenizer)
# `serve` needs a real runner (create_model_runner), which the model library provides.
if(TARGET gpufrac_engine_model)
  target_sources(gpufrac_engine PRIVATE ${CMAKE_CURRENT_LIST_DIR}/serve_command.cpp)
  target_link_libraries(gpufrac_engine PUBLIC gpufrac_engine_model)
endif()
