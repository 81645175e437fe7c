# GPU kernel timings against their ceilings, and a stand-alone calibration
# (--calibrate OUT.json). Built wherever nvcc is; exits 77 without a GPU.
if(HAVE_CUDA AND TARGET up_kernels_cuda AND TARGET up_profiles)
  add_executable(bench_cuda_kernels ${CMAKE_CURRENT_LIST_DIR}/bench_cuda_kernels.cu)
  set_target_properties(bench_cuda_kernels PROPERTIES
    CUDA_ARCHITECTURES "${ULTRAPLAN_CUDA_ARCHS}" CUDA_STANDARD 17)
  target_compile_options(bench_cuda_kernels PRIVATE --extended-lambda)
  target_link_libraries(bench_cuda_kernels PRIVATE up_kernels_cuda up_profiles)
endif()
