# Warnings for our own targets; third-party headers come in as SYSTEM includes.
function(ckpt_warnings target)
  if(CKPT_PYTHON_WHEEL)
    return()  # see the top-level CMakeLists.txt: one compile command across CMake versions
  endif()
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  if(CKPT_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# A library of ours: ckpt_library(NAME SOURCES ... DEPS ...)
function(ckpt_library name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${A_SOURCES})
  # Installed headers keep their paths under include/ (cmake/CkptInstall.cmake).
  target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}>
                                            $<INSTALL_INTERFACE:include>)
  target_link_libraries(${name} PUBLIC ${A_DEPS})
  ckpt_warnings(${name})
endfunction()

# A Catch2 test executable registered with ctest, one ctest entry per test case.
# ckpt_test(NAME SOURCES ... DEPS ...)
function(ckpt_test name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ckpt_catch_main ${A_DEPS})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR})
  target_compile_definitions(${name} PRIVATE
    CKPT_SOURCE_DIR="${CMAKE_SOURCE_DIR}" CKPT_BINARY_DIR="${CMAKE_BINARY_DIR}")
  ckpt_warnings(${name})
  # Test sources share Catch2's header (and libtorch's, where they include it): compiled in
  # batches of 4 (CMake's unity build), in the sanitized tree too, as scripts/tidy.py leaves tests
  # out. Each test file keeps its helpers in a namespace of its own (ckpt::store::retention_test),
  # so that batching files together never joins two helpers of one name. -DCKPT_UNITY=OFF: one
  # file at a time.
  if(CKPT_UNITY)
    set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 4)
  endif()
  # A name that CMake's list splitting mangles (';' or '[' in a test name) would run a filter that
  # matches nothing and "pass": make that a failure.
  set(env "")
  if(CKPT_SANITIZE)
    set(env ENVIRONMENT "LSAN_OPTIONS=suppressions=${CMAKE_SOURCE_DIR}/tests/lsan.supp")
  endif()
  catch_discover_tests(${name} TEST_PREFIX "${name}: "
                       PROPERTIES TIMEOUT 600 FAIL_REGULAR_EXPRESSION "No test cases matched"
                       ${env})
endfunction()

# Compiles `target`'s sources in batches of 4 per translation unit (CMake's unity build), for
# targets whose every source parses the same heavy headers (libtorch, CLI11 + nlohmann-json):
# those are parsed once per batch instead of once per file. Not in the sanitized tree:
# scripts/tidy.py checks that tree's sources one by one. -DCKPT_UNITY=OFF turns it off (one file at a time, as a developer may want while editing).
function(ckpt_unity target)
  if(CKPT_UNITY AND NOT CKPT_SANITIZE)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 4)
  endif()
endfunction()
