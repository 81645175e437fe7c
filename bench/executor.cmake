# A single-rank GPT step against its GEMMs alone (prints; not a test).
if(TARGET up_executor)
  add_executable(bench_cpu_step ${CMAKE_CURRENT_LIST_DIR}/bench_cpu_step.c)
  target_link_libraries(bench_cpu_step PRIVATE up_executor)
endif()
