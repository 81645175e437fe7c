# calib/bench*: the calibration benchmarks behind `ultraplan calibrate`.
# CPU (bench_cpu.c: GEMM, attention, memory, collectives over MPI) goes into
# libultraplan-exec.so; CUDA (bench_cuda.cu: copy, GEMM, attention sweeps;
# bench_cuda_run.c: the NCCL sweeps over executor/cuda/cucomm, the command)
# into libultraplan-cuda.so. Both carry the executor's headers, not its
# objects (the modules hold those once).
# bench_fit.c (the all-to-all fit, pure) is a library of its own so that
# its test needs neither MPI nor a GPU.
add_library(up_bench_fit STATIC ${CMAKE_CURRENT_LIST_DIR}/bench_fit.c)
target_include_directories(up_bench_fit PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(up_bench_fit PUBLIC up_model m)
if(TARGET up_executor_headers)
  add_library(up_bench_cpu STATIC ${CMAKE_CURRENT_LIST_DIR}/bench_cpu.c)
  target_include_directories(up_bench_cpu PUBLIC ${CMAKE_CURRENT_LIST_DIR})
  target_link_libraries(up_bench_cpu PUBLIC up_bench_fit up_executor_headers up_kernels_cpu up_profiles up_model m)
endif()
if(HAVE_CUDA AND TARGET up_kernels_cuda)
  # the device sweeps alone (bench/bench_cuda_kernels links them too)
  add_library(up_bench_cuda_dev STATIC ${CMAKE_CURRENT_LIST_DIR}/bench_cuda.cu)
  set_target_properties(up_bench_cuda_dev PROPERTIES CUDA_ARCHITECTURES "${ULTRAPLAN_CUDA_ARCHS}"
    CUDA_STANDARD 17 POSITION_INDEPENDENT_CODE ON)
  target_compile_options(up_bench_cuda_dev PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--use_fast_math -Xcompiler=-Wall>)
  target_include_directories(up_bench_cuda_dev PUBLIC ${CMAKE_CURRENT_LIST_DIR})
  target_link_libraries(up_bench_cuda_dev PUBLIC up_kernels_cuda up_model)
  if(TARGET up_executor_cuda)
    add_library(up_bench_cuda STATIC ${CMAKE_CURRENT_LIST_DIR}/bench_cuda_run.c)
    target_include_directories(up_bench_cuda PUBLIC ${CMAKE_CURRENT_LIST_DIR})
    target_link_libraries(up_bench_cuda PUBLIC up_bench_cuda_dev up_bench_fit up_executor_cuda up_profiles CUDA::cudart)
  endif()
endif()
