# GPU kernel timings against their ceilings, and a stand-alone calibration
# (--calibrate OUT.json: calib/bench_cuda.cu's device sweeps, no NCCL).
# Built wherever nvcc is; exits 77 without a GPU.
if(HAVE_CUDA AND TARGET up_bench_cuda_dev AND TARGET up_profiles)
  # cunvml.c (NVML by dlopen, plain C) for the SM clock and power of the
  # sustained GEMM loops; its own source, not the executor library
  add_executable(bench_cuda_kernels ${CMAKE_CURRENT_LIST_DIR}/bench_cuda_kernels.cu
    ${PROJECT_SOURCE_DIR}/executor/cuda/cunvml.c)
  set_target_properties(bench_cuda_kernels PROPERTIES
    CUDA_ARCHITECTURES "${ULTRAPLAN_CUDA_ARCHS}" CUDA_STANDARD 17)
  target_compile_options(bench_cuda_kernels PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--extended-lambda>)
  target_include_directories(bench_cuda_kernels PRIVATE ${PROJECT_SOURCE_DIR}/executor/cuda)
  target_link_libraries(bench_cuda_kernels PRIVATE up_bench_cuda_dev up_kernels_cuda up_profiles ${CMAKE_DL_LIBS})
endif()
