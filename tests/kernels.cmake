# CPU kernels and the token data loader.
if(TARGET up_kernels_cpu AND CMOCKA_FOUND)
  up_test(test_kernels_cpu SOURCES test_kernels_cpu.c
          LIBS up_kernels_cpu PkgConfig::CMOCKA LABELS unit)
endif()

# up_data is defined in executor/data.cmake, which executor/CMakeLists.txt
# includes; include it here too when the executor has not (yet).
if(NOT TARGET up_data)
  include(${PROJECT_SOURCE_DIR}/executor/data.cmake)
endif()
if(CMOCKA_FOUND)
  up_test(test_data SOURCES test_data.c LIBS up_data PkgConfig::CMOCKA LABELS unit)
endif()

# fp8 encoding (E4M3/E5M2) and current scaling: the CPU reference the CUDA
# fp8 kernels are held against.
if(TARGET up_kernels_cpu AND CMOCKA_FOUND)
  up_test(test_fp8 SOURCES test_fp8.c LIBS up_kernels_cpu PkgConfig::CMOCKA LABELS unit)
endif()
