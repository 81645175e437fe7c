# TUI responsiveness: milliseconds per key press for 175B on 512 GPUs.
if(TARGET up_tui)
  add_executable(bench_tui ${CMAKE_CURRENT_LIST_DIR}/bench_tui.c)
  target_link_libraries(bench_tui PRIVATE up_tui up_cli)
endif()
