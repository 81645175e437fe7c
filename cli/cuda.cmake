# The CUDA backend of run and calibrate (executor/cuda/, built by
# executor/CMakeLists.txt): ULTRAPLAN_HAVE_CUDA tells cmd_run.c and
# cmd_calibrate.c whether to call it or say that this build has none.
if(TARGET up_executor_cuda)
  target_compile_definitions(ultraplan PRIVATE ULTRAPLAN_HAVE_CUDA=1)
  target_link_libraries(ultraplan PRIVATE up_executor_cuda)
else()
  target_compile_definitions(ultraplan PRIVATE ULTRAPLAN_HAVE_CUDA=0)
endif()
set(HAVE_CUDA_EXECUTOR OFF)
if(TARGET up_executor_cuda)
  set(HAVE_CUDA_EXECUTOR ON)
endif()
report("CUDA executor (run --backend cuda, --proxy-stage)" HAVE_CUDA_EXECUTOR)
