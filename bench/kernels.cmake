# CPU GEMM throughput (prints a table; not a test).
if(TARGET up_kernels_cpu)
  add_executable(bench_cpu_gemm ${CMAKE_CURRENT_LIST_DIR}/bench_cpu_gemm.c)
  target_link_libraries(bench_cpu_gemm PRIVATE up_kernels_cpu)
endif()
