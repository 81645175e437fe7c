# Reliability: extreme but legal inputs, and the libFuzzer smoke run.
up_test(test_extreme SOURCES test_extreme.c LIBS up_cli PkgConfig::CMOCKA LABELS unit)

# tests/fuzz/run.sh builds the harnesses with clang in its own tree and runs
# each for 20 s (77 = skipped when clang or libFuzzer is missing). Once per
# CI run: the harnesses carry their own sanitizers, so not in the Asan build.
if(NOT CMAKE_BUILD_TYPE STREQUAL "Asan")
  add_test(NAME fuzz_smoke COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run.sh 20)
  set_tests_properties(fuzz_smoke PROPERTIES LABELS fuzz SKIP_RETURN_CODE 77 TIMEOUT 900
    ENVIRONMENT "FUZZ_BUILD=${PROJECT_BINARY_DIR}/fuzz-clang;FUZZ_JOBS=2")
endif()
