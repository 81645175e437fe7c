# The CUDA backend of run and calibrate: executor/cuda/ is built here (after
# executor/ and kernels/), and ULTRAPLAN_HAVE_CUDA tells cmd_run.c and
# cmd_calibrate.c whether to call it or say that this build has none.
if(TARGET up_executor)
  add_subdirectory(${PROJECT_SOURCE_DIR}/executor/cuda ${PROJECT_BINARY_DIR}/executor/cuda)
endif()
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
