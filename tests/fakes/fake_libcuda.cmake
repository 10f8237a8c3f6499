# The fake CUDA driver and NVML (see fake_libcuda.h), built as libcuda.so.1 and
# libnvidia-ml.so.1 into one directory that tests put on LD_LIBRARY_PATH, as a real driver's
# directory would be. Included by the test folders that use them.
include_guard(GLOBAL)

set(GPUFRAC_FAKE_CUDA_DIR ${CMAKE_BINARY_DIR}/tests/fakes/cuda)

add_library(fake_libcuda SHARED
  ${CMAKE_CURRENT_LIST_DIR}/fake_libcuda.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fake_libcuda_config.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fake_libcuda_proc.cpp
)
add_library(fake_nvml SHARED
  ${CMAKE_CURRENT_LIST_DIR}/fake_nvml.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fake_libcuda_config.cpp
)
foreach(fake fake_libcuda fake_nvml)
  target_include_directories(${fake} PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  # -Bsymbolic: calls between the fake's own entry points never reach an interposer.
  target_link_options(${fake} PRIVATE -Wl,-Bsymbolic)
  set_target_properties(${fake} PROPERTIES
    CXX_VISIBILITY_PRESET hidden
    VERSION 1 SOVERSION 1
    LIBRARY_OUTPUT_DIRECTORY ${GPUFRAC_FAKE_CUDA_DIR})
endforeach()
set_target_properties(fake_libcuda PROPERTIES OUTPUT_NAME cuda)
set_target_properties(fake_nvml PROPERTIES OUTPUT_NAME nvidia-ml)
