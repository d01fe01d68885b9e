# trainsim_warnings: strict warnings for trainsim's own targets only (never third-party code).
add_library(trainsim_warnings INTERFACE)
target_compile_options(trainsim_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion -Wnon-virtual-dtor
  -Wold-style-cast -Woverloaded-virtual -Wundef -Wcast-align -Wnull-dereference)
if(TRAINSIM_WERROR)
  target_compile_options(trainsim_warnings INTERFACE -Werror)
endif()

# Sanitizers: everything (libraries, tests, the binary) with ASan+UBSan, any finding fatal; -O1
# (added after the build type's flags, so it wins over -O3) keeps the build and the tests fast.
# TRAINSIM_FUZZ adds libFuzzer's coverage instrumentation (clang only); the fuzz binaries link
# libFuzzer itself (fuzz/CMakeLists.txt).
if(TRAINSIM_SANITIZE OR TRAINSIM_FUZZ)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all -O1 -g1)
  add_link_options(-fsanitize=address,undefined)
endif()
if(TRAINSIM_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "TRAINSIM_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++-14")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

# trainsim_add_library(NAME SOURCES ... DEPS ...): one library per top-level folder.
function(trainsim_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(trainsim_${name} STATIC ${ARG_SOURCES})
  # Unity build (sources compiled a few at a time as one translation unit): the JSON, Boost and
  # Eigen headers are parsed once per batch instead of once per file.
  set_target_properties(trainsim_${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 4)
  add_library(trainsim::${name} ALIAS trainsim_${name})
  target_include_directories(trainsim_${name} PUBLIC "${PROJECT_SOURCE_DIR}")
  target_compile_features(trainsim_${name} PUBLIC cxx_std_20)
  target_link_libraries(trainsim_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE trainsim_warnings ${ARG_PRIVATE_DEPS})
endfunction()
